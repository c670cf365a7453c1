"""The needle gate against an in-process server that thinks, answers late, or fails: every probe
ends as a line of niah.log, found, missed or failed with its reason, and the gate never raises."""
from __future__ import annotations

import copy
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from stages.core.gate import gate_settings
from stages.core.config import CampaignError
from stages.core.params_check import check_params
from stages.run import model, needle

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = yaml.safe_load((ROOT / "params.yaml").read_text())
CODE = re.compile(r"The access code is (\d+)\.")
# A gate whose probes time out after about a second, whatever their prompt.
FAST = needle.Gate(depths=(0.1, 0.5, 0.9), seed=11, answer_tokens=2048, template_margin_tokens=16,
                   timeout_base_s=0.8, min_prefill_tok_s=1e9, min_decode_tok_s=1e9)


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory) -> Path:
    """The tokenizer the model stage trains (under a second), as the engine would serve it."""
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    model.build_tokenizer(vocab_size=4096, seed=7).save(str(path))
    return path


class StandIn:
    """A completions server answering each request by the next of `replies`: (delay_s, status,
    text), where `{code}` in the text is the code the prompt holds. Records each request."""

    def __init__(self, replies: list[tuple[float, int, str]]):
        self.replies, self.requests = list(replies), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                delay, status, text = outer.replies[min(len(outer.requests), len(outer.replies)) - 1]
                time.sleep(delay)
                found = CODE.search(body["prompt"])
                text = text.replace("{code}", found.group(1) if found else "none")
                payload = (json.dumps({"choices": [{"text": text}], "usage": {"prompt_tokens": 7}})
                           if status == 200 else text).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:         # the client gave up on this probe
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


THINKING = "<think>" + " ".join(["Let me look through the text for a code."] * 400) + "</think>\n{code}"


def gate(url: str, tokenizer_file: Path, log: Path, g: needle.Gate = FAST) -> tuple[float, list[dict], str]:
    lines: list[str] = []
    score = needle.run_gate(base_url=url, model="m", tokenizer_file=tokenizer_file, max_model_len=4096,
                            gate=g, log_path=log, progress=lines.append)
    *probes, last = log.read_text().splitlines()
    assert last == f"GATE niah score= {score}"
    return score, [json.loads(p) for p in probes], "\n".join(lines)


def test_a_model_that_thinks_a_while_and_answers_late_passes(tmp_path, tokenizer_file):
    with StandIn([(0.3, 200, THINKING)]) as server:
        score, probes, said = gate(server.url, tokenizer_file, tmp_path / "niah.log")
    assert score == 1.0
    assert [p["ok"] for p in probes] == [True] * 3 and all(p["failure"] is None for p in probes)
    assert all(p["reasoning_tokens"] > 2000 and p["answer"].strip().isdigit() for p in probes)
    assert all(0.3 <= p["latency_s"] < p["timeout_s"] for p in probes)
    # the whole answer budget goes to the server; the prompt fills the context less it and the margin
    assert {r["max_tokens"] for r in server.requests} == {FAST.answer_tokens}
    assert "found" in said


def test_an_answer_after_the_timeout_is_a_failed_probe_and_the_next_probe_runs(tmp_path, tokenizer_file):
    replies = [(0.1, 200, THINKING), (3.0, 200, THINKING), (0.1, 200, THINKING)]
    with StandIn(replies) as server:
        t0 = time.perf_counter()
        score, probes, said = gate(server.url, tokenizer_file, tmp_path / "niah.log")
        elapsed = time.perf_counter() - t0
    assert score == pytest.approx(2 / 3)
    assert [p["ok"] for p in probes] == [True, False, True]
    late = probes[1]
    assert late["failure"].startswith("no answer within the probe's timeout of 0.8 s (ReadTimeout)")
    assert late["answer"] == "" and late["reasoning_tokens"] is None
    assert 0.8 <= late["latency_s"] < 3.0 and elapsed < 3.0
    assert len(server.requests) == 3 and "timeout" in said


def test_an_http_error_is_a_failed_probe_with_its_reason(tmp_path, tokenizer_file):
    replies = [(0, 500, "engine crashed: CUDA out of memory HF_TOKEN=hf_abcdefghijklmnopqrstu"),
               (0, 200, THINKING)]
    with StandIn(replies) as server:
        score, probes, _ = gate(server.url, tokenizer_file, tmp_path / "niah.log")
    assert [p["ok"] for p in probes] == [False, True, True]
    assert probes[0]["failure"] == "HTTP 500 from the server: engine crashed: CUDA out of memory HF_TOKEN=***"
    assert score == pytest.approx(2 / 3)


def test_reasoning_that_never_closes_is_a_missed_probe_even_when_it_names_the_code(tmp_path, tokenizer_file):
    with StandIn([(0, 200, "<think>The access code is {code}, so I will answer")]) as server:
        score, probes, _ = gate(server.url, tokenizer_file, tmp_path / "niah.log")
    assert score == 0.0
    assert all(p["failure"] == "reasoning block not closed within the answer budget of 2,048 tokens"
               and p["answer"] == "" and p["reasoning_tokens"] > 0 for p in probes)


def test_a_server_that_is_gone_fails_every_probe_without_raising(tmp_path, tokenizer_file):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    score, probes, _ = gate(f"http://127.0.0.1:{port}", tokenizer_file, tmp_path / "niah.log")
    assert score == 0.0 and len(probes) == 3
    assert all(p["failure"].startswith("ConnectError") for p in probes)


@pytest.mark.parametrize("text, reasoning, answer", [
    ("4821937", None, "4821937"),
    ("<think>hmm</think> 4821937", "hmm", " 4821937"),
    ("thinking without an opening tag</think>4821937", "thinking without an opening tag", "4821937"),
    ("<think>one 4821937", "one 4821937", None),
])
def test_the_answer_is_read_after_the_reasoning_block(text, reasoning, answer):
    assert needle.split_reasoning(text) == (reasoning, answer)


def test_the_node_gate_prompt_reaches_a_million_tokens_in_a_few_encodes(tokenizer_file):
    """A 1,048,576-token server: the prompt is the context less the answer budget and the margin,
    counted by the tokenizer, and built with a handful of encodes, not a search over them all."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_file))
    encodes = []

    class Counting:
        def encode(self, text):
            encodes.append(len(text))
            return tok.encode(text)

    g = needle.Gate.from_settings(gate_settings(SHIPPED, "glm53-tp8-dcp8"))
    target = g.prompt_target(1_048_576)
    prompt, n = needle.build_prompt(tokenizer=Counting(), target_tokens=target, depth=0.5,
                                    code="4821937", seed=11)
    assert 1_000_000 <= n <= 1_050_000 and target - 100 < n <= target
    assert len(tok.encode(prompt).ids) == n and n + g.answer_tokens <= 1_048_576
    assert "The access code is 4821937." in prompt
    assert len(encodes) <= 6
    # the probe may take as long as a slow layout's million-token prefill and a long answer
    assert g.timeout_s(n) > n / g.min_prefill_tok_s + g.answer_tokens / g.min_decode_tok_s


def test_gate_settings_layer_profile_and_spec_over_the_defaults():
    params = copy.deepcopy(SHIPPED)
    params["specs"]["glm53-tp8-dcp8"]["gate"] = {"answer_tokens": 16384, "timeout_base_s": 600}
    local = gate_settings(params, "tiny-seqs4")
    node = gate_settings(params, "glm53-tp8-dcp8")
    assert local == {**params["gate"], **params["profiles"]["local-cpu"]["gate"]}
    assert node["answer_tokens"] == 16384 and node["timeout_base_s"] == 600
    assert node["min_prefill_tok_s"] == params["profiles"]["h200x8"]["gate"]["min_prefill_tok_s"]
    assert gate_settings(params, "qwen3-235b-tp4")["answer_tokens"] == params["gate"]["answer_tokens"]
    assert check_params(params, ROOT) == []
    with pytest.raises(CampaignError, match="leave no room for a gate prompt"):
        needle.Gate.from_settings(local | {"answer_tokens": 4000}, "specs.tiny-seqs4", 4096)

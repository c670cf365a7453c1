"""The multi-turn client (ramp, agents) against a small OpenAI-style streaming server.

The server streams one chunk per token with a short pause, answers with the access code when the
prompt holds one (so the needle path is exercised both ways), counts prompt tokens by words, and
serves a /metrics text whose counters grow with every request.
"""
from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from stages.core.multiturn_shapes import workload_from_params
from stages.run import model
from stages.run import multiturn
from stages.core.config import CampaignError



@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory) -> Path:
    """The tokenizer the model stage trains (under a second), as the engine would serve it."""
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    model.build_tokenizer(vocab_size=4096, seed=7).save(str(path))
    return path


class FakeEngine(BaseHTTPRequestHandler):
    requests: list[dict] = []
    hide_code = False
    fail_turn: int | None = None
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_GET(self):
        with self.lock:
            n = len(self.requests)
        body = (f"vllm:prefix_cache_queries_total{{engine=\"0\"}} {100.0 * n}\n"
                f"vllm:prefix_cache_hits_total{{engine=\"0\"}} {60.0 * n}\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.requests.append(req)
            n = len(self.requests)
        if self.fail_turn == n:
            self.send_response(500)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"boom!")
            return
        code = re.search(r"access code is (\d+)", req["prompt"])
        words = (code.group(1) if code and not self.hide_code else "no").split()
        words += ["x"] * (req["max_tokens"] - len(words))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for w in words:
            time.sleep(0.002)
            self.wfile.write(f"data: {json.dumps({'choices': [{'text': w + ' '}]})}\n\n".encode())
            self.wfile.flush()
        usage = {"prompt_tokens": len(req["prompt"].split()), "completion_tokens": len(words)}
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()


@pytest.fixture
def engine():
    FakeEngine.requests, FakeEngine.hide_code, FakeEngine.fail_turn = [], False, None
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeEngine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


RAMP = {"kind": "ramp", "start_tokens": 200, "end_tokens": 600, "turns": 3, "sessions": 2, "output_tokens": 8}
AGENTS = {"kind": "agents", "sessions": 3, "shared_history_tokens": 300, "turn_tokens": 50, "turns": 2,
          "output_tokens": 6}


def test_ramp_targets_grow_evenly_from_start_to_end():
    w = workload_from_params("ramp", {**RAMP, "turns": 5, "start_tokens": 32768, "end_tokens": 1000000})
    assert w.targets() == [32768, 274576, 516384, 758192, 1000000]
    assert (w.point_id(3), w.log_name) == ("ramp__t03", "ramp.log")
    a = workload_from_params("agents", AGENTS)
    assert (a.point_id(), a.log_name) == ("agents__s03", "agents.agents.jsonl")


@pytest.mark.parametrize("spec,message", [
    ({**RAMP, "kind": "chat"}, "kind must be one of ramp, agents"),
    ({**RAMP, "turns": 0}, "ramp.turns must be a positive integer"),
    ({**RAMP, "end_tokens": 100}, "end_tokens is below start_tokens"),
    ({**RAMP, "end_tokens": 5000}, "beyond the server's maximum context of 4,096"),
    ({k: v for k, v in AGENTS.items() if k != "turn_tokens"}, "turn_tokens must be a positive integer"),
])
def test_bad_workload_params_are_one_line_errors(spec, message):
    with pytest.raises(CampaignError, match=re.escape(message)):
        workload_from_params("ramp", spec, max_model_len=4096)


def test_ramp_grows_one_conversation_and_checks_the_needle_every_turn(engine, tmp_path, tokenizer_file):
    w = workload_from_params("ramp", RAMP)
    log = multiturn.run_workload(w, base_url=engine, model="m", tokenizer_file=tokenizer_file, folder=tmp_path)
    assert (log.requests, log.failed) == (6, 0)
    rows = lines(tmp_path / "ramp.log")
    assert [r["event"] for r in rows] == ["workload"] + ["request"] * 6 + ["done"]
    assert rows[0]["params"] == RAMP and rows[0]["sessions"] == 2
    requests = rows[1:-1]
    assert sorted((r["turn"], r["session"]) for r in requests) == [(t, s) for t in (1, 2, 3) for s in (0, 1)]
    assert sorted(r["request_idx"] for r in requests) == list(range(6))
    assert all(r["needle_ok"] and r["error"] == "" and r["output_tokens"] == 8 for r in requests)
    assert all(0 < r["ttft_s"] <= r["latency_s"] and r["max_itl_s"] > 0 for r in requests)
    assert [r["target_tokens"] for r in requests if r["session"] == 0] == [200, 400, 600]
    # each turn re-sends the whole conversation: the prompt of turn t+1 extends that of turn t
    prompts = [FakeEngine.requests[i]["prompt"] for i in range(6)]
    by_session = {}
    for p in prompts:
        by_session.setdefault(re.search(r"access code is (\d+)", p).group(1), []).append(p)
    assert len(by_session) == 2          # two sessions, two different needles
    for turns in by_session.values():
        assert all(later.startswith(earlier) for earlier, later in zip(turns, turns[1:]))
    assert all(r["stream"] and r["ignore_eos"] for r in FakeEngine.requests)
    # a /metrics pair around every turn
    snaps = sorted(p.name for p in (tmp_path / "bench").iterdir())
    assert snaps == [f"ramp__t{t:02d}.metrics.{ph}.txt" for t in (1, 2, 3) for ph in ("after", "before")]


def test_ramp_records_a_missed_needle_and_a_failed_turn(engine, tmp_path, tokenizer_file):
    FakeEngine.hide_code, FakeEngine.fail_turn = True, 2
    w = workload_from_params("ramp", {**RAMP, "sessions": 1})
    log = multiturn.run_workload(w, base_url=engine, model="m", tokenizer_file=tokenizer_file, folder=tmp_path)
    assert (log.requests, log.failed) == (3, 1)
    requests = [r for r in lines(tmp_path / "ramp.log") if r["event"] == "request"]
    assert [r["needle_ok"] for r in requests] == [False, None, False]
    failed = requests[1]
    assert failed["error"].startswith("HTTPStatusError: HTTP 500: boom!")
    assert (failed["output_tokens"], failed["ttft_s"], failed["input_tokens"]) == (0, None, None)


def test_agents_share_a_history_and_run_their_sessions_at_once(engine, tmp_path, tokenizer_file):
    w = workload_from_params("agents", AGENTS)
    multiturn.run_workload(w, base_url=engine, model="m", tokenizer_file=tokenizer_file, folder=tmp_path)
    rows = lines(tmp_path / "agents.agents.jsonl")
    requests = [r for r in rows if r["event"] == "request"]
    assert len(requests) == 6 and rows[-1] == {**rows[-1], "event": "done", "requests": 6, "failed": 0}
    assert all(r["needle_ok"] is None and r["answer"] is None for r in requests)
    assert {r["point_id"] for r in requests} == {"agents__s03"}
    first_turns = [r for r in requests if r["turn"] == 1]
    # concurrent: every session sent its first turn before any first turn had finished
    assert max(r["started_s"] for r in first_turns) < min(r["started_s"] + r["latency_s"] for r in first_turns)
    prompts = [q["prompt"] for q in FakeEngine.requests]
    shared = min(prompts, key=len)[:200]
    assert all(p.startswith(shared) for p in prompts)              # one history, re-sent by everyone
    assert len(set(prompts)) == 6                                  # each session grows its own way
    assert sorted(p.name for p in (tmp_path / "bench").iterdir()) == [
        "agents__s03.metrics.after.txt", "agents__s03.metrics.before.txt"]


def test_a_server_that_is_gone_fails_each_request_with_its_error(tmp_path, tokenizer_file):
    w = workload_from_params("ramp", {**RAMP, "sessions": 1, "turns": 2})
    log = multiturn.run_workload(w, base_url="http://127.0.0.1:9", model="m", tokenizer_file=tokenizer_file,
                                 folder=tmp_path, timeout_s=5)
    requests = [r for r in lines(tmp_path / "ramp.log") if r["event"] == "request"]
    assert (log.requests, log.failed) == (2, 2)
    assert all(r["error"].startswith("ConnectError") for r in requests)
    assert not (tmp_path / "bench").exists() or not list((tmp_path / "bench").iterdir())


def test_the_ramp_stops_when_the_engine_is_gone(engine, tmp_path, tokenizer_file):
    alive = iter([True, False])
    w = workload_from_params("ramp", {**RAMP, "sessions": 1})
    log = multiturn.run_workload(w, base_url=engine, model="m", tokenizer_file=tokenizer_file, folder=tmp_path,
                                 alive=lambda: next(alive, False))
    assert log.requests == 1

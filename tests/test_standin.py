"""The stand-in engine answers as the run stage's clients expect: the needle's code, after a
reasoning block when asked for one, plain or streamed with usage, and vLLM's counters."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

STANDIN = Path(__file__).parent / "fixtures" / "fake_docker" / "standin_engine.py"
PORT = 8049
PROMPT = "Stone river. The access code is 4711. Quiet meadow.\n\nWhat is the access code?"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    log = tmp_path_factory.mktemp("standin") / "server.log"
    env = {**os.environ, "STANDIN_THINK_TOKENS": "20", "STANDIN_ANSWER_DELAY_S": "0.3"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(STANDIN), "--model", "no-such-folder", "--port",
                                 str(PORT), "--max-model-len", "64"], stdout=out, stderr=subprocess.STDOUT,
                                env=env)
    url = f"http://127.0.0.1:{PORT}"
    try:
        for _ in range(100):
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert "Application startup complete." in log.read_text()
        assert "GPU KV cache size: 65,536 tokens" in log.read_text()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_answer_comes_after_the_reasoning_block_and_late(base_url):
    t0 = time.perf_counter()
    short = httpx.post(base_url + "/v1/completions", json={"prompt": PROMPT, "max_tokens": 16}).json()
    assert time.perf_counter() - t0 >= 0.3
    assert short["choices"][0]["text"].startswith("<think>") and "4711" not in short["choices"][0]["text"]
    assert short["usage"]["completion_tokens"] == 16
    full = httpx.post(base_url + "/v1/completions", json={"prompt": PROMPT, "max_tokens": 64}).json()
    assert full["choices"][0]["text"].split("</think>")[-1].strip() == "4711"
    assert full["usage"] == {"prompt_tokens": len(PROMPT.split()), "completion_tokens": 21,
                             "total_tokens": len(PROMPT.split()) + 21}


def test_streamed_completions_carry_usage_and_the_counters_grow(base_url):
    before = httpx.get(base_url + "/metrics").text
    body = {"prompt": PROMPT, "max_tokens": 8, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    with httpx.stream("POST", base_url + "/v1/completions", json=body) as resp:
        events = [line[6:] for line in resp.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]).startswith("<think>")
    assert chunks[-1]["usage"]["completion_tokens"] == 8
    after = httpx.get(base_url + "/metrics").text
    count = lambda text: float(next(line.split()[-1] for line in text.splitlines()  # noqa: E731
                                    if line.startswith("vllm:generation_tokens_total")))
    assert count(after) - count(before) == 8
    assert httpx.get(base_url + "/v1/models").json()["data"][0]["max_model_len"] == 64


def test_a_prompt_longer_than_the_context_is_refused(base_url):
    resp = httpx.post(base_url + "/v1/completions", json={"prompt": "word " * 65, "max_tokens": 4})
    assert resp.status_code == 400 and "maximum context" in resp.json()["message"]

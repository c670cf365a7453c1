"""A job log that tails several services' logs (`tail -f logs/*.out` under an HPC job: a header
`==> logs/X.out <==` each time the output turns to another file), vLLM's among them.

No public job log of that shape was found, so the tests make one: the engine's block lines are a
real vLLM log of a Slurm job (shared/real_logs, read at test time, never copied here), cut into
runs and interleaved, as tail writes them, with four services of this file's own making (a
router and a web frontend, Uvicorn apps printing their own "Application startup complete", a
retriever and a queue worker), whose lines come up before vLLM's KV pool line and hold errors of
their own. vLLM's facts must be read from its blocks alone, at the raw file's line numbers.
"""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from helpers.shared_folder import REAL_LOGS
from stages.formats import tailed
from stages.formats.lines import read_chunks
from stages.formats.sglang_log import parse_sglang_log
from stages.formats.vllm_log import parse_vllm_log

pytestmark = pytest.mark.shared

# The other services' lines, in the order they print them (tail shows each run under its header).
ROUTER_START = [
    "INFO:     Started server process [248601]",
    "INFO:     Waiting for application startup.",
    "2025-12-20 18:31:24,118 router INFO Using backend http://127.0.0.1:8426/v1 for the model",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://0.0.0.0:9000 (Press CTRL+C to quit)",
]
FRONTEND_START = [
    "INFO:     Started server process [248633]",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://0.0.0.0:7860 (Press CTRL+C to quit)",
]
RETRIEVER = [
    "2025-12-20 18:32:10 retriever INFO loading 1,204,331 passages",
    "2025-12-20 18:32:31 retriever INFO index build took 21.4 seconds",
    "2025-12-20 18:32:31 retriever INFO GPU KV cache size: not used by the retriever",
]
ROUTER_ERROR = [
    'INFO:     127.0.0.1:40112 - "GET /health HTTP/1.1" 503 Service Unavailable',
    "ERROR:    Exception in ASGI application",
    "Traceback (most recent call last):",
    '  File "/opt/router/app.py", line 88, in health',
    "    await client.get(BACKEND)",
    "httpx.ConnectError: [Errno 111] Connection refused",
]
WORKER = [
    "[2025-12-20 18:33:05,002: INFO/MainProcess] Connected to redis://127.0.0.1:6379/0",
    "[2025-12-20 18:33:05,010: ERROR/MainProcess] consumer: Cannot connect: ValueError: bad queue name",
    "[2025-12-20 18:33:07,441: INFO/MainProcess] celery@gpuh05 ready.",
]
FRONTEND_LATER = [
    'INFO:     10.1.4.17:51022 - "POST /ask HTTP/1.1" 200 OK',
    "RuntimeError: the frontend's own error, after vLLM was ready",
]


def job_log(real: str, cuts: list[int], others: list[tuple[str, list[str]]]) -> tuple[bytes, dict[int, int]]:
    """A tailed job log: the real log's lines (after its `# source:` line) cut before each line of
    `cuts` (the real file's numbers), its runs placed under `==> logs/vllm.out <==` between the
    other services' runs, `others[i]` before the i-th run of vLLM's. Returns the bytes and where
    each line of the real file landed (real line -> job log line)."""
    lines = (REAL_LOGS / real).read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    edges = [2] + cuts + [len(lines) + 1]
    out: list[bytes] = []
    at: dict[int, int] = {}

    def block(name: str, body: list[bytes]) -> None:
        if out:
            out.append(b"")
        out.append(f"==> logs/{name}.out <==".encode())
        out.extend(body)

    for n in range(len(edges) - 1):
        if n < len(others):
            name, text = others[n]
            block(name, [t.encode() for t in text])
        block("vllm", [])
        for real_line in range(edges[n], edges[n + 1]):
            at[real_line] = len(out) + 1
            out.append(lines[real_line - 1])
    for name, text in others[len(edges) - 1:]:
        block(name, [t.encode() for t in text])
    return b"\n".join(out) + b"\n", at


def facts(parsed, name: str) -> list[tuple[int, float | str | None]]:
    return [(f.line, f.value_num if f.value_num is not None else f.value_text)
            for f in parsed.facts if f.fact == name]


def chunked(data: bytes, engine: str, size: int = 4096):
    """The log as ingest reads it: in pieces of `size` bytes ending at a newline, opened again
    for the second pass."""
    return tailed.engine_chunks(lambda: read_chunks(io.BytesIO(data), size), engine)


@pytest.fixture(scope="module")
def ready_job() -> tuple[bytes, dict[int, int]]:
    """vllm_07 (vLLM 0.12.0, TP2, a Slurm job's output: KV pool at L85, init engine at L96, ready at
    L146, 21 stats lines, no exception) among four other services."""
    return job_log("vllm_07_v1_ready_stats_oserror_in_warning.log", [60, 110, 150],
                   [("router", ROUTER_START), ("frontend", FRONTEND_START),
                    ("retriever", RETRIEVER), ("worker", WORKER),
                    ("frontend", FRONTEND_LATER)])


def test_the_job_log_is_of_the_shape_tail_writes(ready_job):
    data, at = ready_job
    text = data.decode()
    assert text.startswith("==> logs/router.out <==\n")
    names = {line for line in text.splitlines() if line.startswith("==> ")}
    assert names == {f"==> logs/{n}.out <==" for n in ("router", "frontend", "retriever", "worker", "vllm")}
    assert "\n\n==> logs/vllm.out <==\n" in text
    # another service's Uvicorn readiness comes before vLLM's KV pool line
    assert text.index("Application startup complete") < text.index("GPU KV cache size: 910,464")
    raw = (REAL_LOGS / "vllm_07_v1_ready_stats_oserror_in_warning.log").read_bytes().split(b"\n")
    job = data.split(b"\n")
    assert all(job[new - 1] == raw[old - 1] for old, new in at.items())


@pytest.mark.parametrize("reading", ["whole", "chunked"])
def test_vllm_is_read_from_its_own_blocks_at_the_raw_lines(ready_job, reading):
    data, at = ready_job
    parsed = parse_vllm_log(data if reading == "whole" else chunked(data, "vllm"))
    assert facts(parsed, "kv_tokens") == [(at[85], 910464.0)]
    assert facts(parsed, "max_concurrency_x") == [(at[86], 22.23)]
    assert facts(parsed, "init_s") == [(at[96], 26.95)]
    assert facts(parsed, "ready") == [(at[146], 1.0)]
    assert facts(parsed, "error") == []              # the router's, worker's, frontend's: not vLLM's
    assert facts(parsed, "engine_version") == [(at[24], "0.12.0"), (at[34], "0.12.0")]
    assert len(parsed.stats) == 21 and {s.line for s in parsed.stats} <= set(at.values())
    assert parsed.errors == []
    job = data.split(b"\n")
    assert b"GPU KV cache size: 910,464 tokens" in job[at[85] - 1]
    assert b"Application startup complete." in job[at[146] - 1] and b"APIServer" in job[at[146] - 1]


def test_read_whole_the_job_log_loses_vllm_s_pool_to_another_app_s_readiness(ready_job):
    """What the engine's blocks guard against: read as one log, the router's readiness ends
    vLLM's startup before its KV pool line, and the router's error is taken for vLLM's."""
    data, _ = ready_job
    whole = parse_vllm_log(iter([(1, data)]))         # chunks are read as given
    assert facts(whole, "kv_tokens") == []
    assert facts(whole, "ready") == [(5, 1.0)]                    # the router's
    assert [f.detail for f in whole.facts if f.fact == "error"] == ["RuntimeError"]   # the frontend's


@pytest.fixture(scope="module")
def crashed_job() -> tuple[bytes, dict[int, int]]:
    """vllm_02 (vLLM 0.12.0: KV pool at L38, ready at L91, the engine dead at L182 with
    EngineDeadError) among services that raise errors of their own before and after it."""
    return job_log("vllm_02_v1_ready_stats_then_enginedead.log", [30, 80, 120, 181],
                   [("router", ROUTER_START), ("router", ROUTER_ERROR), ("worker", WORKER),
                    ("retriever", RETRIEVER), ("frontend", FRONTEND_START + FRONTEND_LATER)])


@pytest.mark.parametrize("reading", ["whole", "chunked"])
def test_only_the_engine_s_errors_are_its_errors(crashed_job, reading):
    data, at = crashed_job
    parsed = parse_vllm_log(data if reading == "whole" else chunked(data, "vllm", 2048))
    assert facts(parsed, "kv_tokens") == [(at[38], 198288.0)]
    assert facts(parsed, "init_s") == [(at[42], 2.15)]
    assert facts(parsed, "ready") == [(at[91], 1.0)]
    errors = [f for f in parsed.facts if f.fact == "error"]
    assert [(f.line, f.detail) for f in errors] == [(at[182], "vllm.v1.engine.exceptions.EngineDeadError")]
    assert errors[0].worker == "APIServer pid=523647"
    text = data.decode()
    assert text.index("httpx.ConnectError") < text.index("ValueError: bad queue name") < \
        text.index("EngineDeadError")


def test_a_log_without_headers_or_without_the_engine_s_marks_is_read_whole():
    plain = b"INFO:     Application startup complete.\nGPU KV cache size: 1,024 tokens\n"
    assert tailed.engine_view(plain, "vllm") is plain
    others = b"==> logs/a.out <==\nhello\n\n==> logs/b.out <==\nworld\n"
    assert tailed.engine_view(others, "vllm") is others
    assert list(tailed.engine_chunks(lambda: read_chunks(io.BytesIO(others)), "vllm")) == [(1, others)]


def test_the_engine_s_blocks_are_those_holding_most_of_its_marks():
    data = (b"==> logs/proxy.out <==\nforwarding to vllm at :8000\n\n"
            b"==> logs/server.out <==\n(APIServer pid=1) INFO 12-20 18:31:21 [api_server.py:1772] "
            b"vLLM API server version 0.12.0\n(EngineCore_DP0 pid=2) INFO 12-20 18:32:54 "
            b"[kv_cache_utils.py:1286] GPU KV cache size: 4,096 tokens\n\n"
            b"==> logs/proxy.out <==\nvllm is up\n")
    assert tailed.survey([(1, data)], "vllm") == "logs/server.out"
    assert list(tailed.engine_blocks([(1, data)], "logs/server.out")) == [
        (5, data[data.index(b"(APIServer"):data.index(b"==> logs/proxy.out <==\nvllm")])]


def test_sglang_is_read_from_its_own_blocks():
    data, at = job_log("sglang_01_ready_swa_prefill_decode.log", [40],
                       [("router", ROUTER_START + ROUTER_ERROR), ("frontend", FRONTEND_START)])
    alone = parse_sglang_log((REAL_LOGS / "sglang_01_ready_swa_prefill_decode.log").read_bytes())
    for reading in (data, chunked(data, "sglang", 1024)):
        parsed = parse_sglang_log(reading)
        assert [(f.fact, f.line, f.value_num) for f in parsed.facts] == \
            [(f.fact, at[f.line], f.value_num) for f in alone.facts]
        assert [s.line for s in parsed.stats] == [at[s.line] for s in alone.stats]


# A retriever serving its own small embedding model prints lines of the same shape as the
# engine's, before the engine does.
EMBEDDER = [
    "INFO 12-20 18:31:40 [gpu_model_runner.py:3338] Model loading took 0.6 GiB and 4.1 seconds",
    "INFO 12-20 18:31:41 [kv_cache_utils.py:1229] Maximum concurrency for 512 tokens per request: 900.00x",
]


def test_the_launch_quote_keeps_to_the_engine_s_blocks():
    from stages.render import quotes

    data = job_log("vllm_07_v1_ready_stats_oserror_in_warning.log", [60, 110, 150],
                   [("router", ROUTER_START), ("retriever", EMBEDDER), ("frontend", FRONTEND_START),
                    ("worker", WORKER)])[0]
    text, rules = data.decode(), quotes.load_quotes()
    name, spans = tailed.engine_lines(data, "vllm")
    assert name == "logs/vllm.out" and len(spans) == 4
    lines = text.split("\n")
    theirs = {i + 1 for i, line in enumerate(lines) if line in EMBEDDER}
    # read whole, the quote takes the embedder's weights and concurrency for the engine's
    whole = quotes.pick(text, "ready", None, rules)
    assert theirs <= {q.line for q in whole.quoted}
    kept = quotes.pick(text, "ready", None, rules, spans)
    assert not theirs & {q.line for q in kept.quoted} and not theirs & {c for q in kept.quoted for c in q.copies}
    assert all(any(a <= q.line <= b for a, b in spans) for q in kept.quoted)
    assert any("Maximum concurrency" in q.text for q in kept.quoted)     # the engine's own
    block = quotes.quote_block(text, "ready", None, "server.log", rules, tailed=(name, spans))
    assert "only the engine&#x27;s lines, under ==&gt; logs/vllm.out &lt;==" in block     # HTML-escaped

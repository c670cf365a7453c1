"""server.log of a scripted node attempt (synth_node.py): what a vLLM container prints, in the
shapes of real logs (../shared/LOG_FORMATS.md): startup with its kernel, weight and KV cache
lines, a worker's traceback for a crashed launch, and while serving the uvicorn access lines and
the periodic `Engine 000: Avg prompt throughput ...` stats."""
from __future__ import annotations

import random
from datetime import datetime, timedelta

from stages.tools.synth.synth_node_plan import Attempt
from stages.tools.synth.synth_node_sim import Req

API = "APIServer pid=1"
SITE = "/usr/local/lib/python3.12/dist-packages/vllm"
STATS_EVERY_S = 10.0

Line = tuple[float, str]            # (seconds since the run started, the line)


class Clock:
    """vLLM's log header at a time of the run: `INFO 11-16 06:03:31 [file.py:123] `."""

    def __init__(self, started: datetime):
        self.started = started

    def at(self, t: float, tag: str | None, src: str, level: str = "INFO") -> str:
        when = self.started + timedelta(seconds=t)
        head = f"({tag}) " if tag else ""
        return f"{head}{level} {when:%m-%d %H:%M:%S} [{src}] "


def _core_tag(a: Attempt) -> str:
    return f"EngineCore_DP0 pid={a.pid_base}"


def _worker_tag(a: Attempt, rank: int) -> str:
    name = a.startup.workers[rank]
    pid = a.pid_base + rank if name.startswith("EngineCore") else a.pid_base + 1600 + rank
    return f"{name} pid={pid}"


def startup_lines(a: Attempt, *, clock: Clock, version: str, model_path: str, args: dict,
                  max_model_len: int) -> list[Line]:
    """From the version banner to the KV cache lines (or as far as a crash lets it get)."""
    s = a.startup
    core = _core_tag(a)
    non_default = {"model_tag": model_path, "host": "0.0.0.0", "model": model_path,
                   **{k.lstrip("-").replace("-", "_"): v for k, v in args.items() if v is not False}}
    out: list[Line] = [
        (4.1, clock.at(4.1, API, "api_server.py:1885") + f"vLLM API server version {version}"),
        (4.1, clock.at(4.1, API, "utils.py:328") + f"non-default args: {non_default}"),
        (9.8, clock.at(9.8, API, "model.py:547") + f"Resolved architecture: {s.arch}"),
        (9.8, clock.at(9.8, API, "model.py:1510") + f"Using max model len {max_model_len}"),
        (14.2, clock.at(14.2, core, "core.py:93") + f"Initializing a V1 LLM engine (v{version}) with config: "
                                                    f"model='{model_path}', max_seq_len={max_model_len}, "
                                                    f"tensor_parallel_size={args.get('--tensor-parallel-size', 1)}, "
                                                    f"kv_cache_dtype={args.get('--kv-cache-dtype', 'auto')}"),
    ]
    for rank in range(len(s.workers)):
        tag = _worker_tag(a, rank)
        out.append((31.0 + rank * 0.2, clock.at(31.0 + rank * 0.2, tag, "gpu_model_runner.py:2912")
                    + f"Starting to load model {model_path}..."))
    if s.attention:
        tag = _worker_tag(a, 0)
        out.append((33.5, clock.at(33.5, tag, "cuda.py:404") + f"Using {s.attention} attention backend out of "
                                                                f"potential backends: ['{s.attention}']"))
    if s.moe:
        out.append((34.0, clock.at(34.0, _worker_tag(a, 0), "fused_moe.py:812")
                    + f"Using '{s.moe[0]}' {s.moe[1]} MoE backend."))
    if s.linear:
        out.append((34.2, clock.at(34.2, _worker_tag(a, 0), "linear.py:188")
                    + f"Using {s.linear} for MXFP8 GEMM"))
    done = 31.0 + s.load_s
    for rank in range(len(s.workers)):
        t = done + rank * 0.31
        out.append((t, clock.at(t, _worker_tag(a, rank), "gpu_model_runner.py:2981")
                    + f"Model loading took {s.weights_gib + rank * 0.01:.2f} GiB memory and "
                      f"{s.load_s + rank * 0.31:.6f} seconds"))
    if s.kv_gib is None:
        return out
    t = done + 60.0
    if s.compile_s:
        out.append((t, clock.at(t, _worker_tag(a, 0), "backends.py:548")
                    + f"torch.compile takes {s.compile_s:.2f} s in total"))
    for rank in range(len(s.workers)):
        out.append((t + 20, clock.at(t + 20, _worker_tag(a, rank), "gpu_worker.py:298")
                    + f"Available KV cache memory: {s.kv_gib + (rank % 3) * 0.01:.2f} GiB"))
    if s.kv_tokens is None:
        return out
    t += 21
    out += [
        (t, clock.at(t, core, "kv_cache_utils.py:1229") + f"GPU KV cache size: {s.kv_tokens:,} tokens"),
        (t, clock.at(t, core, "kv_cache_utils.py:1234") + f"Maximum concurrency for {max_model_len:,} "
                                                          f"tokens per request: {s.kv_tokens / max_model_len:.2f}x"),
    ]
    ready = a.ready_s
    init = f"took {s.init_s:.2f} s" + (f" (compilation: {s.compile_s:.2f} s)" if s.compile_s else "")
    out += [
        (ready - 3, clock.at(ready - 3, core, "core.py:210") + "init engine (profile, create kv cache, warmup "
                                                               f"model) {init}"),
        (ready - 1, clock.at(ready - 1, API, "api_server.py:1920") + "Starting vLLM API server 0 on "
                                                                     "http://0.0.0.0:8000"),
        (ready - 1, f"({API}) INFO:     Started server process [1]"),
        (ready - 1, f"({API}) INFO:     Waiting for application startup."),
        (ready - 0.5, f"({API}) INFO:     Application startup complete."),
        (ready, access("GET /health", 200, ready)),
    ]
    return out


def crash_lines(a: Attempt, *, clock: Clock) -> list[Line]:
    """The raiser's traceback (every line under its own tag), the engine core's, the API server's."""
    c = a.crash
    assert c is not None
    t = c.after_s
    tag = f"{c.worker} pid={c.pid}"
    src = "multiproc_executor.py:749" if c.via_worker_proc else "core.py:843"
    err = lambda line, who=tag, where=src: (t, clock.at(t, who, where, "ERROR") + line)  # noqa: E731
    out = [err("WorkerProc failed to start." if c.via_worker_proc else "EngineCore failed to start."),
           err("Traceback (most recent call last):")]
    for file, line, fn, code in c.frames:
        out += [err(f'  File "{SITE}/{file}", line {line}, in {fn}'), err(f"    {code}")]
    out.append(err(c.error))
    core = _core_tag(a)
    if c.via_worker_proc:
        out += [err("EngineCore failed to start.", core, "core.py:843"),
                err("Traceback (most recent call last):", core, "core.py:843"),
                err(f'  File "{SITE}/v1/executor/multiproc_executor.py", line 128, in _init_executor', core,
                    "core.py:843"),
                err("    self.workers = WorkerProc.wait_for_ready(unready_workers)", core, "core.py:843"),
                err("Exception: WorkerProc initialization failed due to an exception in a background process. "
                    "See stack trace for root cause.", core, "core.py:843")]
    out += [(t + 0.4, f"({core}) Process EngineCore_DP0:"),
            (t + 1.2, f"({API}) Traceback (most recent call last):"),
            (t + 1.2, f'({API})   File "{SITE}/v1/engine/utils.py", line 933, in wait_for_engine_startup'),
            (t + 1.2, f"({API})     raise RuntimeError("),
            (t + 1.2, f"({API}) RuntimeError: Engine core initialization failed. See root cause above. "
                      "Failed core proc(s): {}")]
    return out


def access(request: str, status: int, t: float, port: int | None = None) -> str:
    text = {200: "OK", 404: "Not Found"}[status]
    return f'(APIServer pid=1) INFO:     127.0.0.1:{port or 40000 + int(t * 7) % 20000} - "{request} HTTP/1.1" ' \
           f"{status} {text}"


def stats_lines(reqs: list[Req], *, clock: Clock, kv_tokens: int, start: float, end: float,
                rng: random.Random) -> list[Line]:
    """The periodic stats lines while requests are in flight, every ten seconds from `start`."""
    out: list[Line] = []
    t = start + STATS_EVERY_S
    queried = hit = 0.0
    while t <= end + STATS_EVERY_S:
        lo = t - STATS_EVERY_S
        prompt = sum(r.prefilled * _overlap(r.begin, r.first, lo, t) for r in reqs)
        gen = sum((r.output - 1) * _overlap(r.first, r.end, lo, t) for r in reqs)
        running = [r for r in reqs if r.start <= t < r.end]
        waiting = sum(1 for r in reqs if r.send <= t < r.start)
        held = sum(r.prompt + r.output * _overlap(r.first, r.end, r.first, t) for r in running)
        for r in reqs:
            if lo <= r.begin < t:
                queried += r.prompt
                hit += r.prompt - r.prefilled
        rate = 100.0 * hit / queried if queried else 0.0
        out.append((t, clock.at(t, API, "loggers.py:248")
                    + f"Engine 000: Avg prompt throughput: {prompt / STATS_EVERY_S:.1f} tokens/s, Avg generation "
                      f"throughput: {gen / STATS_EVERY_S:.1f} tokens/s, Running: {len(running)} reqs, Waiting: "
                      f"{waiting} reqs, GPU KV cache usage: {min(100.0, 100.0 * held / kv_tokens):.1f}%, "
                      f"Prefix cache hit rate: {rate:.1f}%"))
        t += STATS_EVERY_S + rng.choice((0.0, 0.0, 1.0))
    return out


def _overlap(a: float, b: float, lo: float, hi: float) -> float:
    """Share of [a, b] inside [lo, hi]."""
    if b <= a:
        return 1.0 if lo <= a < hi else 0.0
    return max(0.0, min(b, hi) - max(a, lo)) / (b - a)


def shutdown_lines(t: float) -> list[Line]:
    return [(t, f"({API}) INFO:     Shutting down"), (t, f"({API}) INFO:     Waiting for application shutdown."),
            (t, f"({API}) INFO:     Application shutdown complete.")]


def render(lines: list[Line]) -> str:
    """The lines in time order (stable: lines of one moment keep their order)."""
    return "".join(text + "\n" for _, text in sorted(lines, key=lambda x: x[0]))

"""A synthetic run's server.log (synth.py): vLLM or SGLang startup, steady serving repeated to
size, shutdown, or a crash ending in a traceback; plain, V0 or `docker logs --timestamps` shaped."""
from __future__ import annotations

import random
from datetime import datetime, timedelta

from stages.tools.synth.synth_plan import RunPlan, label_tokens, kv_tokens

CRASH_LOG_LINES = 60
PERIOD_TICKS = 240               # distinct stats ticks in a log, repeated to its size
CRASHES = (
    "NotImplementedError: DCP for FlashMLA sparse",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 3 has a total capacity "
    "of 139.81 GiB of which 1.12 GiB is free.",
    "ValueError: To serve at least one request with the models's max seq len (1048576), (60.00 GiB KV "
    "cache is needed, which is larger than the available KV cache memory (-5.34 GiB).",
    "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
)


def _vllm_header(level: str, when: datetime, source: str) -> str:
    return f"{level} {when:%m-%d %H:%M:%S} [{source}] "


def _startup_lines(plan: RunPlan) -> list[tuple[datetime, str]]:
    """(time, line without an outer prefix) of a vLLM launch up to the ready line."""
    name, path, _, tp, dp, dcp, _, max_len, moe = plan.model
    t = plan.started
    api, core = "(APIServer pid=1)", "(EngineCore_DP0 pid=402)"
    version = "0.10.0" if plan.style == "v0" else "0.31.0"
    h = lambda s, src, level="INFO": f"{api if src.startswith('api') else core} " + _vllm_header(level, t + timedelta(seconds=s), src)  # noqa: E731
    kv = kv_tokens(plan)
    out = [
        (t, h(0, "api_server.py:1885") + f"vLLM API server version {version}"),
        (t, h(0, "api_utils.py:286") + f"non-default args: {{'model': '{path}', 'tensor_parallel_size': {tp}, "
                                       f"'max_model_len': {label_tokens(max_len)}}}"),
        (t, h(8, "core.py:133") + f"Initializing a V1 LLM engine (v{version}) with config: model='{path}', "
                                  f"tensor_parallel_size={tp}, decode_context_parallel_size={dcp}"),
    ]
    for rank in range(min(tp, 8)):
        worker = f"(Worker_TP{rank}{f'_DCP{rank}' if dcp > 1 else ''} pid={1900 + rank})"
        out.append((t, f"{worker} " + _vllm_header("INFO", t + timedelta(seconds=40), "gpu_model_runner.py:2653")
                    + f"Model loading took {90 + rank * 0.01:.2f} GiB memory and {200 + rank:.6f} seconds"))
    if moe:
        out.append((t, h(41, "fused_moe.py:812") + f"Using '{moe}' Mxfp4 MoE backend."))
    out += [
        (t, h(42, "cuda.py:410") + "Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN']"),
        (t, h(120, "gpu_worker.py:298") + "Available KV cache memory: 25.80 GiB"),
        (t, h(121, "kv_cache_utils.py:1229") + f"GPU KV cache size: {kv:,} tokens"),
        (t, h(121, "kv_cache_utils.py:1234") + f"Maximum concurrency for {label_tokens(max_len):,} tokens per "
                                              f"request: {kv / label_tokens(max_len):.2f}x"),
        (t, h(300, "core.py:210") + "init engine (profile, create kv cache, warmup model) took 181.30 seconds"),
        (t, h(301, "api_server.py:1920") + "Starting vLLM API server 0 on http://0.0.0.0:8000"),
        (t, "INFO:     Started server process [1]"),
        (t, "INFO:     Waiting for application startup."),
        (t, "INFO:     Application startup complete."),
    ]
    return out


def _stats_line(rng: random.Random, engine: int, v0: bool) -> str:
    prompt = rng.choice((0.0, rng.uniform(1000, 90000)))
    gen = rng.uniform(0, 4000)
    running, waiting = rng.randrange(65), rng.choice((0, 0, 0, rng.randrange(40)))
    usage = rng.uniform(0, 98)
    if v0:
        return (f"Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} "
                f"tokens/s, Running: {running} reqs, Swapped: 0 reqs, Pending: {waiting} reqs, "
                f"GPU KV cache usage: {usage:.1f}%, CPU KV cache usage: 0.0%.")
    return (f"Engine {engine:03d}: Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation "
            f"throughput: {gen:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, "
            f"GPU KV cache usage: {usage:.1f}%, Prefix cache hit rate: {rng.uniform(0, 60):.1f}%")


def _sglang_stats(rng: random.Random, when: datetime, tp: bool) -> list[str]:
    tag = f"[{when:%Y-%m-%d %H:%M:%S}{' TP0' if tp else ''}] "
    return [
        tag + f"Prefill batch. #new-seq: 1, #new-token: {rng.randrange(1, 16) * 1024}, #cached-token: "
              f"{rng.randrange(4096)}, token usage: {rng.random():.2f}, #running-req: {rng.randrange(64)}, "
              f"#queue-req: {rng.randrange(8)}, ",
        tag + f"Decode batch. #running-req: {rng.randrange(64)}, #token: {rng.randrange(200000)}, "
              f"token usage: {rng.random():.2f}, gen throughput (token/s): {rng.uniform(10, 3000):.2f}, "
              f"#queue-req: {rng.randrange(8)}",
    ]


def _access_line(rng: random.Random, path: str = "POST /v1/completions") -> str:
    return f'INFO:     127.0.0.1:{rng.randrange(30000, 60000)} - "{path} HTTP/1.1" 200 OK'


def _docker_prefix(when: datetime, n: int) -> str:
    return f"{when:%Y-%m-%dT%H:%M:%S}.{(n * 7919) % 10**9:09d}Z "


def _period(plan: RunPlan, rng: random.Random, start: datetime) -> str:
    """PERIOD_TICKS ticks of steady serving: access lines and one stats line per engine."""
    lines = []
    api = "(APIServer pid=1) "
    for tick in range(PERIOD_TICKS):
        when = start + timedelta(seconds=10 * tick)
        body = [_access_line(rng) for _ in range(rng.choice((0, 1, 2, 3, 6)))]
        if tick % 6 == 0:
            body.append(_access_line(rng, "GET /metrics"))
        if plan.engine == "sglang":
            body += _sglang_stats(rng, when, plan.model[3] > 1)
        elif plan.style == "v0":  # vLLM up to 0.7: no process tag, no opening bracket, no engine
            body.append(f"INFO {when:%m-%d %H:%M:%S} metrics.py:351] " + _stats_line(rng, 0, True))
        else:
            header = api + _vllm_header("INFO", when, "loggers.py:123")
            body += [header + _stats_line(rng, e, False) for e in range(plan.engines)]
        if plan.style == "docker":
            body = [_docker_prefix(when, tick * 31 + i) + line for i, line in enumerate(body)]
        lines += body
    return "\n".join(lines) + "\n"


def _prefixed(plan: RunPlan, pairs: list[tuple[datetime, str]]) -> str:
    if plan.style == "docker":
        return "".join(_docker_prefix(t, i) + line + "\n" for i, (t, line) in enumerate(pairs))
    return "".join(line + "\n" for _, line in pairs)


def _sglang_startup(plan: RunPlan) -> list[tuple[datetime, str]]:
    t = plan.started
    tag = f"[{t:%Y-%m-%d %H:%M:%S}{' TP0' if plan.model[3] > 1 else ''}] "
    return [
        (t, tag + "Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, avail mem=47.1 GB, mem usage=91.07 GB."),
        (t, tag + f"max_total_num_tokens={kv_tokens(plan)}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                  f"max_running_requests=64, context_len={label_tokens(plan.model[7])}"),
        (t, tag + "The server is fired up and ready to roll!"),
    ]


def server_log(plan: RunPlan) -> bytes:
    """A whole server.log: startup, steady serving repeated to plan.log_bytes, shutdown or crash."""
    rng = random.Random(plan.seed + 2)
    if plan.status == "failed":
        return _prefixed(plan, _crash_lines(plan, rng)).encode()
    startup = _sglang_startup(plan) if plan.engine == "sglang" else _startup_lines(plan)
    head = _prefixed(plan, startup).encode()
    period = _period(plan, rng, plan.started + timedelta(seconds=400)).encode()
    tail = _prefixed(plan, [(plan.started, "INFO:     Shutting down"),
                            (plan.started, "INFO:     Application shutdown complete.")]).encode()
    room = max(plan.log_bytes - len(head) - len(tail), 0)
    repeats, rest = divmod(room, len(period))
    cut = period.rfind(b"\n", 0, rest) + 1
    return b"".join((head, period * repeats, period[:cut], tail))


def _crash_lines(plan: RunPlan, rng: random.Random) -> list[tuple[datetime, str]]:
    lines = _startup_lines(plan)[:-8]  # the crash comes before the KV cache is allocated
    t = plan.started + timedelta(seconds=130)
    worker = f"(Worker_TP{rng.randrange(plan.model[3])} pid=1926)"
    err = lambda src: f"{worker} " + _vllm_header("ERROR", t, src)  # noqa: E731
    frames = [err("multiproc_executor.py:1058") + "Traceback (most recent call last):"]
    for depth in range(CRASH_LOG_LINES // 2):
        frames.append(err("multiproc_executor.py:1058")
                      + f'  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/mod{depth}.py", '
                        f"line {100 + depth}, in step_{depth}")
        frames.append(err("multiproc_executor.py:1058") + f"    result = step_{depth + 1}(state)")
    frames.append(err("multiproc_executor.py:1058") + CRASHES[plan.seed % len(CRASHES)])
    frames.append("(EngineCore_DP0 pid=402) " + _vllm_header("ERROR", t, "core.py:708")
                  + "EngineCore failed to start.")
    frames.append("(APIServer pid=1) " + _vllm_header("ERROR", t, "api_server.py:1")
                  + "RuntimeError: Engine core initialization failed. See root cause above.")
    return lines + [(t, line) for line in frames]


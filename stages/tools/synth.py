"""Synthetic run folders in the shapes real runs have, for the ingest benchmark and its tests.

A campaign of `runs` folders on the 8-GPU node: most launches ready, with long server logs made
of periodic `Engine 000: Avg prompt throughput ...` lines and uvicorn access lines, benchmark
results saved with --save-detailed and /metrics scraped around each point. One run in ten is a
crashed launch (cmd.sh and a server.log ending in a traceback), some older runs have no
meta.json and print the V0 stats line, some logs went through `docker logs --timestamps`, a few
runs are SGLang, and one in twenty was interrupted mid-benchmark (its last result file is cut
short: the only files ingest is expected to report as errors).

Everything is drawn from one seed, so the same arguments give the same bytes. Big files are
built from a block of distinct lines repeated to size, never line by line.

Example:
    from stages.tools import synth
    synth.run(out_dir=Path("data/bench/c1/runs"), runs=300, total_bytes=5 * 10**9, seed=1)
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from stages.ingest.parsers.cmd import human_int

SYNTH_VERSION = 2
LOG_SHARE = 0.85                 # of the campaign's bytes; the rest is benchmark results and /metrics
CRASH_LOG_LINES = 60
PERIOD_TICKS = 240               # distinct stats ticks in a log, repeated to its size
CAMPAIGN_START = datetime(2026, 10, 1, 6, 0, tzinfo=timezone.utc)
RUN_SPACING = timedelta(minutes=47, seconds=13)

Progress = Callable[[str], None]

# One cycle of twenty runs fixes the proportions: (status, has meta.json, log style, engine).
KIND_CYCLE = (
    ("ready", True, "plain", "vllm"), ("failed", False, "plain", "vllm"),
    ("ready", True, "docker", "vllm"), ("ready", False, "v0", "vllm"),
    ("ready", True, "plain", "sglang"), ("interrupted", True, "plain", "vllm"),
    ("ready", True, "plain", "vllm"), ("ready", True, "docker", "vllm"),
    ("ready", False, "v0", "vllm"), ("ready", True, "plain", "vllm"),
    ("ready", True, "plain", "vllm"), ("failed", True, "docker", "vllm"),
    ("ready", True, "plain", "vllm"), ("ready", False, "v0", "vllm"),
    ("ready", True, "docker", "vllm"), ("ready", True, "plain", "vllm"),
    ("ready", True, "plain", "vllm"), ("ready", True, "docker", "vllm"),
    ("ready", True, "plain", "vllm"), ("ready", True, "plain", "vllm"),
)
# (model, model path, layout, tp, dp, dcp, ctx label, max model len, moe backend)
MODELS = (
    ("glm53", "/models/glm53", "tp8_dcp8", 8, 1, 8, "1024k", "1M", "MARLIN"),
    ("qwen3-235b", "/models/qwen3-235b-a22b", "tp4", 4, 1, 1, "256k", "256k", "TRITON"),
    ("qwen3-235b", "/models/qwen3-235b-a22b", "dp2_tp4", 4, 2, 1, "128k", "128k", "TRITON"),
    ("llama33-70b", "/models/llama-3.3-70b", "tp4", 4, 1, 1, "128k", "128k", None),
    ("gpt-oss-120b", "/models/gpt-oss-120b", "dp8", 1, 8, 1, "128k", "128k", "MARLIN"),
    ("deepseek-v32", "/models/deepseek-v3.2", "tp8", 8, 1, 1, "160k", "160k", "FLASHINFER_CUTLASS"),
)
# (workload, prompt tokens, output tokens, concurrency list)
WORKLOADS = (
    ("long", 100_000, 256, (1, 2, 4, 8, 16)),
    ("chat", 2_048, 128, (1, 4, 16, 64)),
    ("rag", 16_000, 256, (1, 8, 32)),
)
NEW_IMAGE, OLD_IMAGE, SGLANG_IMAGE = "vllm/vllm-openai:v0.31.0", "vllm/vllm-openai:v0.10.0", "lmsysorg/sglang:v0.5.4"
CRASHES = (
    "NotImplementedError: DCP for FlashMLA sparse",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 3 has a total capacity "
    "of 139.81 GiB of which 1.12 GiB is free.",
    "ValueError: To serve at least one request with the models's max seq len (1048576), (60.00 GiB KV "
    "cache is needed, which is larger than the available KV cache memory (-5.34 GiB).",
    "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
)


@dataclass(frozen=True)
class RunPlan:
    index: int
    run_id: str
    status: str                 # ready | failed | interrupted
    has_meta: bool
    style: str                  # plain | docker | v0 (log shape)
    engine: str                 # vllm | sglang
    model: tuple
    started: datetime
    log_bytes: int
    seed: int

    @property
    def engines(self) -> int:
        return self.model[4]

    @property
    def image(self) -> str:
        if self.engine == "sglang":
            return SGLANG_IMAGE
        return OLD_IMAGE if self.style == "v0" else NEW_IMAGE


# ---------------------------------------------------------------- the plan

def plan_campaign(*, runs: int, total_bytes: int, seed: int) -> list[RunPlan]:
    """One RunPlan per run; server.log sizes drawn log-normal, summing to LOG_SHARE of the bytes."""
    rng = random.Random(seed)
    weights = [rng.lognormvariate(0.0, 0.7) for _ in range(runs)]
    kinds = [KIND_CYCLE[i % len(KIND_CYCLE)] for i in range(runs)]
    ready_weight = sum(w for w, k in zip(weights, kinds) if k[0] != "failed") or 1.0
    log_budget = total_bytes * LOG_SHARE
    plans = []
    for i, (weight, (status, has_meta, style, engine)) in enumerate(zip(weights, kinds)):
        model = MODELS[rng.randrange(len(MODELS))]
        started = CAMPAIGN_START + RUN_SPACING * i
        run_id = f"{model[0]}__{model[2]}__{model[6]}__{engine}__{started:%m%d-%H%M%S}"
        size = 0 if status == "failed" else int(log_budget * weight / ready_weight)
        plans.append(RunPlan(i, run_id, status, has_meta, style, engine, model, started, size,
                             rng.randrange(2**31)))
    return plans


# ---------------------------------------------------------------- small files

def cmd_text(plan: RunPlan) -> str:
    name, path, _, tp, dp, dcp, _, max_len, _ = plan.model
    gpus = "0,1,2,3" if tp * dp <= 4 else "0,1,2,3,4,5,6,7"
    head = (f"#!/bin/sh\n# engine command of run {plan.run_id}, run from the project root\n"
            f"docker run --rm --gpus '\"device={gpus}\"' --ipc=host -e NCCL_NVLS_ENABLE=0 "
            f"-e NCCL_CUMEM_ENABLE=0 -v /models:/models:ro -p 8000:8000 --name {name} \\\n  ")
    if plan.engine == "sglang":
        return (head + f"{plan.image} python3 -m sglang.launch_server --model-path {path} --tp {tp} "
                f"--dp-size {dp} --context-length {_tokens(max_len)} --port 8000\n")
    args = f"--tensor-parallel-size {tp}"
    if dp > 1:
        args += f" --data-parallel-size {dp}"
    if dcp > 1:
        args += f" --decode-context-parallel-size {dcp}"
    if plan.style == "v0":
        return head + f"{plan.image} --model {path} {args} --max-model-len {max_len} --max-num-seqs 64\n"
    return (head + f"{plan.image} serve {path} \\\n  {args} --max-model-len {max_len} "
            f"--kv-cache-dtype fp8 --enable-prefix-caching --port 8000\n")


def _tokens(label: str) -> int:
    """A context label (128k, 1024k) in tokens, as vLLM reads the same flag value."""
    return human_int(label)


def kv_tokens(plan: RunPlan) -> int:
    return 1_573_325 + (plan.seed % 997) * 1024


def meta_json(plan: RunPlan, points: int) -> str:
    name, path, layout, tp, dp, _, ctx, max_len, _ = plan.model
    finished = plan.started + timedelta(minutes=40)
    meta = {
        "schema_version": 1, "run_id": plan.run_id, "spec": f"{name}-{layout}-{ctx}",
        "spec_params": {"model": name, "layout": layout, "profile": "h200x8",
                        "args": {"--tensor-parallel-size": tp, "--max-model-len": max_len}},
        "profile": "h200x8", "engine": plan.engine,
        "engine_version": "0.5.4" if plan.engine == "sglang" else "0.31.0",
        "image": plan.image, "image_digest": f"sha256:{plan.seed:064x}"[:71],
        "executor": "docker", "gpus": list(range(min(8, tp * dp))), "model": name,
        "model_path": path, "layout": layout, "ctx_label": ctx, "git_sha": f"{plan.seed:040x}"[:40],
        "params_hash": f"{plan.seed:016x}"[:16], "node": {"cpus": 128, "gpus": 8},
        "started_at": f"{plan.started:%Y-%m-%dT%H:%M:%SZ}",
        "finished_at": f"{finished:%Y-%m-%dT%H:%M:%SZ}", "points": points,
    }
    return json.dumps(meta, indent=2, sort_keys=True) + "\n"


def launch_out(plan: RunPlan, points: int) -> str:
    ready_s = 300 + plan.seed % 400 + 0.1 * (plan.seed % 10)
    lines = [f"status={'ready' if plan.status != 'failed' else 'failed'}", f"ready_s={ready_s:.1f}",
             f"engine_kv_tokens={kv_tokens(plan)}", "cross_p2p=ok", "gate_score=1.0",
             f"points={points}",
             f"run_status={'interrupted' if plan.status == 'interrupted' else 'complete'}"]
    return "\n".join(lines) + "\n"


def niah_log(plan: RunPlan) -> str:
    rng = random.Random(plan.seed + 1)
    ctx = _tokens(plan.model[7])
    lines = []
    for key, depth in enumerate((0.1, 0.25, 0.5, 0.75, 0.9)):
        lines.append(json.dumps({"key": key, "depth": depth, "prompt_tokens": int(ctx * 0.9) - rng.randrange(200),
                                 "ok": True, "latency_s": round(rng.uniform(20, 90), 3),
                                 "answer": f"The magic number is {rng.randrange(10**6, 10**7)}."}))
    lines.append("GATE niah score= 1.0")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- server.log

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
                                       f"'max_model_len': {_tokens(max_len)}}}"),
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
        (t, h(121, "kv_cache_utils.py:1234") + f"Maximum concurrency for {_tokens(max_len):,} tokens per "
                                              f"request: {kv / _tokens(max_len):.2f}x"),
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
                  f"max_running_requests=64, context_len={_tokens(plan.model[7])}"),
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


# ---------------------------------------------------------------- benchmark results

def _number_pool(rng: random.Random, size: int, low: float, high: float) -> list[str]:
    pool = [repr(rng.uniform(low, high)) for _ in range(size)]
    return pool + pool


def _array(pool: list[str], start: int, count: int) -> str:
    half = len(pool) // 2
    out = []
    while count > 0:
        take = min(count, half)
        out.append(", ".join(pool[start % half: start % half + take]))
        count -= take
        start += take
    return "[" + ", ".join(out) + "]"


def bench_json(plan: RunPlan, workload: str, prompt: int, output: int, concurrency: int,
               pools: tuple[list[str], list[str]], text: str) -> str:
    """One `vllm bench serve --save-result --save-detailed` object, built as text."""
    itl_pool, ttft_pool = pools
    rng = random.Random(plan.seed * 31 + concurrency * 7 + len(workload))
    n = 2 * concurrency
    duration = rng.uniform(30, 600)
    head = {
        "date": f"{plan.started + timedelta(minutes=10):%Y%m%d-%H%M%S}", "endpoint_type": "vllm",
        "backend": "vllm", "label": None, "model_id": plan.model[1], "tokenizer_id": plan.model[1],
        "num_prompts": n, "workload": workload, "concurrency": str(concurrency), "run_id": plan.run_id,
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": concurrency, "duration": duration,
        "completed": n, "failed": 0, "total_input_tokens": n * prompt, "total_output_tokens": n * output,
        "request_throughput": n / duration, "request_goodput": None,
        "output_throughput": n * output / duration, "total_token_throughput": n * (prompt + output) / duration,
    }
    tail = {"max_output_tokens_per_s": rng.uniform(100, 5000), "max_concurrent_requests": concurrency}
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p90", "p99"):
            tail[f"{stat}_{metric}_ms"] = rng.uniform(5, 5000)
    starts = [f"{i * 0.01:.6f}" for i in range(n)]
    arrays = {
        "input_lens": "[" + ", ".join([str(prompt)] * n) + "]",
        "output_lens": "[" + ", ".join([str(output)] * n) + "]",
        "ttfts": _array(ttft_pool, rng.randrange(4096), n),
        "itls": "[" + ", ".join(_array(itl_pool, rng.randrange(4096), output - 1) for _ in range(n)) + "]",
        "latencies": _array(ttft_pool, rng.randrange(4096), n),
        "start_times": "[" + ", ".join(starts) + "]",
        "generated_texts": "[" + ", ".join(json.dumps(text[i % 50: i % 50 + output * 4]) for i in range(n)) + "]",
        "errors": "[" + ", ".join(['""'] * n) + "]",
    }
    body = json.dumps(head)[:-1] + ", " + ", ".join(f'"{k}": {v}' for k, v in arrays.items())
    return body + ", " + json.dumps(tail)[1:]


def metrics_text(plan: RunPlan, step: int, after: bool) -> str:
    """A /metrics scrape (Prometheus text) with the counters ingest and derive read."""
    name = plan.model[1]
    queries = 1_000_000 * step + (500_000 if after else 0)
    hits = queries // 3
    lines = ["# HELP python_gc_objects_collected_total Objects collected during gc",
             "# TYPE python_gc_objects_collected_total counter"]
    lines += [f'python_gc_objects_collected_total{{generation="{g}"}} {1000.0 * (g + 1)}' for g in range(3)]
    buckets = ("0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75",
               "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0", "+Inf")
    for e in range(plan.engines):
        labels = f'engine="{e}",model_name="{name}"'
        lines += [
            "# TYPE vllm:prefix_cache_queries_total counter",
            f"vllm:prefix_cache_queries_total{{{labels}}} {float(queries)}",
            "# TYPE vllm:prefix_cache_hits_total counter",
            f"vllm:prefix_cache_hits_total{{{labels}}} {float(hits)}",
            f"vllm:prompt_tokens_total{{{labels}}} {float(queries + 17)}",
            f"vllm:generation_tokens_total{{{labels}}} {float(queries // 40)}",
            f"vllm:num_preemptions_total{{{labels}}} 0.0",
            f"vllm:kv_cache_usage_perc{{{labels}}} {0.01 * (step % 90)}",
            f"vllm:num_requests_running{{{labels}}} {float(step % 64)}",
            f"vllm:num_requests_waiting{{{labels}}} 0.0",
        ]
        for family in ("time_to_first_token_seconds", "e2e_request_latency_seconds",
                       "request_queue_time_seconds", "request_prefill_time_seconds",
                       "request_decode_time_seconds", "inter_token_latency_seconds"):
            lines.append(f"# TYPE vllm:{family} histogram")
            for k, le in enumerate(buckets):
                lines.append(f'vllm:{family}_bucket{{engine="{e}",le="{le}",model_name="{name}"}} '
                             f"{float(step * 2 + k * (2 if after else 1))}")
            lines.append(f"vllm:{family}_count{{{labels}}} {float(step * 2 + 44)}")
            lines.append(f"vllm:{family}_sum{{{labels}}} {step * 3.25 + 1.5}")
    return "\n".join(lines) + "\n"


def bench_files(plan: RunPlan) -> dict[str, str]:
    """{relative name: text} of the bench/ folder; an interrupted run's last result is cut short."""
    if plan.status == "failed":
        return {}
    rng = random.Random(plan.seed + 3)
    pools = (_number_pool(rng, 8192, 0.008, 0.09), _number_pool(rng, 8192, 0.05, 40.0))
    words = "the quick brown fox jumps over the lazy dog while the needle waits in a haystack ".split()
    text = " ".join(rng.choice(words) for _ in range(2000))
    files: dict[str, str] = {}
    step = 0
    for workload, prompt, output, levels in WORKLOADS:
        for c in levels:
            point = f"{workload}__c{c:02d}"
            files[f"bench/{point}.metrics.before.txt"] = metrics_text(plan, step, False)
            files[f"bench/{point}.json"] = bench_json(plan, workload, prompt, output, c, pools, text)
            files[f"bench/{point}.metrics.after.txt"] = metrics_text(plan, step, True)
            files[f"bench/{point}.cmd"] = (
                f"vllm bench serve --backend vllm --base-url http://127.0.0.1:8000 --model {plan.model[1]} "
                f"--dataset-name random --random-input-len {prompt} --random-output-len {output} "
                f"--num-prompts {2 * c} --max-concurrency {c} --save-result --save-detailed "
                f"--result-filename {point}.json --metadata workload={workload} concurrency={c} "
                f"run_id={plan.run_id}\n")
            step += 1
    if plan.status == "interrupted":
        last = [name for name in files if name.endswith(".json")][-1]
        files[last] = files[last][: len(files[last]) // 2]
        files.pop(last.replace(".json", ".metrics.after.txt"))
    return files


def points_of(plan: RunPlan) -> int:
    return 0 if plan.status == "failed" else sum(len(levels) for *_, levels in WORKLOADS)


# ---------------------------------------------------------------- writing

def write_run(plan: RunPlan, runs_dir: Path) -> dict[str, int]:
    """Write one run folder; returns bytes written by kind (log, bench, metrics, other)."""
    folder = runs_dir / plan.run_id
    (folder / "bench").mkdir(parents=True, exist_ok=True)
    sizes = {"log": 0, "bench": 0, "metrics": 0, "other": 0}

    def put(name: str, data: str | bytes, kind: str) -> None:
        raw = data.encode() if isinstance(data, str) else data
        (folder / name).write_bytes(raw)
        sizes[kind] += len(raw)

    put("cmd.sh", cmd_text(plan), "other")
    put("server.log", server_log(plan), "log")
    if plan.status == "failed":
        (folder / "bench").rmdir()
        return sizes
    points = points_of(plan)
    put("launch.out", launch_out(plan, points), "other")
    put("niah.log", niah_log(plan), "other")
    if plan.has_meta:
        put("meta.json", meta_json(plan, points), "other")
    for name, text in bench_files(plan).items():
        kind = "metrics" if ".metrics." in name else "bench" if name.endswith(".json") else "other"
        put(name, text, kind)
    return sizes


def run(*, out_dir: Path, runs: int, total_bytes: int, seed: int = 1,
        progress: Progress | None = None) -> dict:
    """Write a synthetic campaign of `runs` folders under `out_dir`; returns what was written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _line: None)
    totals = {"log": 0, "bench": 0, "metrics": 0, "other": 0}
    plans = plan_campaign(runs=runs, total_bytes=total_bytes, seed=seed)
    for n, plan in enumerate(plans, start=1):
        for kind, size in write_run(plan, out_dir).items():
            totals[kind] += size
        if n % 25 == 0 or n == len(plans):
            say(f"synth {n}/{len(plans)} runs, {sum(totals.values()) / 1e9:.2f} GB")
    return {
        "synth_version": SYNTH_VERSION, "runs": runs, "seed": seed, "total_bytes_target": total_bytes,
        "bytes": totals, "total_bytes": sum(totals.values()),
        "run_ids": [p.run_id for p in plans],
        "broken_files": [f"{p.run_id}/{name}" for p in plans if p.status == "interrupted"
                         for name in [_cut_file(p)]],
        "kinds": _kind_counts(plans),
    }


def _cut_file(plan: RunPlan) -> str:
    workload, _, _, levels = WORKLOADS[-1]
    return f"bench/{workload}__c{levels[-1]:02d}.json"


def _kind_counts(plans: list[RunPlan]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in plans:
        for key in (p.status, p.engine, p.style, "meta" if p.has_meta else "no_meta"):
            counts[key] = counts.get(key, 0) + 1
    return counts

"""A synthetic run's bench/ folder (synth.py): `vllm bench serve --save-detailed` results, the
/metrics scrapes around each point and the bench commands."""
from __future__ import annotations

import json
import random
from datetime import timedelta

from stages.tools.synth.synth_plan import RunPlan

# (workload, prompt tokens, output tokens, concurrency list)
WORKLOADS = (
    ("long", 100_000, 256, (1, 2, 4, 8, 16)),
    ("chat", 2_048, 128, (1, 4, 16, 64)),
    ("rag", 16_000, 256, (1, 8, 32)),
)


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


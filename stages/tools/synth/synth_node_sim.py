"""The requests of the scripted node campaign (synth_node.py), served on a simple engine model,
and the files they leave: `vllm bench serve --save-detailed` results, /metrics scrapes and the
multi-turn logs.

The engine model: a request waits for a sequence slot (the lower of the sequence cap and the
sequences whose context fits the KV pool), prefills alone at the load's rate (prefill is
serialised), then decodes at the load's step, a little slower with every other sequence running.
"""
from __future__ import annotations

import json
import random
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from stages.tools.synth.synth_node_plan import CACHED_PREFILL_TOK_S, Load

BOOT_S = 4000.0                     # the client's perf_counter when the run starts


@dataclass
class Req:
    send: float                     # seconds since the run started
    start: float                    # a sequence slot is free
    first: float                    # first token
    end: float
    prompt: int
    prefilled: int                  # prompt tokens computed (the rest came from the prefix cache)
    output: int
    itls: list[float]
    begin: float = 0.0              # prefill begins


@dataclass
class Counters:
    """The engine's cumulative /metrics counters (one engine)."""
    queries: int = 0
    hits: int = 0
    prompt: int = 0
    generation: int = 0
    success: int = 0
    ttfts: list[float] = field(default_factory=list)

    def add(self, reqs: list[Req]) -> None:
        for r in reqs:
            self.queries += r.prompt
            self.hits += r.prompt - r.prefilled
            self.prompt += r.prompt
            self.generation += r.output
            self.success += 1
            self.ttfts.append(r.first - r.send)


def serve(load: Load, *, prompts: list[int], cached: list[int], output: int, slots: int, t0: float,
          rng: random.Random, concurrency: int) -> list[Req]:
    """Requests sent by a client keeping `concurrency` in flight, on `slots` sequence slots."""
    client = [t0] * concurrency
    server = [t0] * slots
    prefill_free = t0
    running = min(slots, concurrency)
    out = []
    for prompt, hit in zip(prompts, cached):
        send = min(client)
        client.remove(send)
        start = max(send, min(server))
        server.remove(min(server))
        begin = max(start, prefill_free)
        computed = prompt - hit
        rate = CACHED_PREFILL_TOK_S if hit else load.prefill_tok_s
        first = begin + (prompt if hit else computed) / rate * rng.uniform(0.97, 1.03)
        prefill_free = first
        step = load.tpot_ms / 1000 * (1 + 0.035 * (running - 1))
        itls = [round(step * rng.uniform(0.9, 1.12), 4) for _ in range(output - 1)]
        end = first + sum(itls)
        client.append(end)
        server.append(end)
        out.append(Req(send, start, first, end, prompt, computed, output, itls, begin))
    return out


def slots_for(kv_tokens: int, max_num_seqs: int, context: int) -> int:
    return max(1, min(max_num_seqs, kv_tokens // context))


# ---------------------------------------------------------------- vllm bench serve result

def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def bench_result(reqs: list[Req], *, when: datetime, model: str, workload: str, concurrency: int,
                 run_id: str, texts: list[str]) -> tuple[str, dict]:
    """The result file as `vllm bench serve --save-result --save-detailed` writes it, and its summary."""
    t0 = min(r.send for r in reqs)
    duration = max(r.end for r in reqs) - t0
    n = len(reqs)
    out_tokens = sum(r.output for r in reqs)
    ttfts = [r.first - r.send for r in reqs]
    tpots = [(r.end - r.first) / (r.output - 1) for r in reqs]
    itls = [x for r in reqs for x in r.itls]
    e2el = [r.end - r.send for r in reqs]
    result = {
        "date": f"{when:%Y%m%d-%H%M%S}", "endpoint_type": "vllm", "backend": "vllm", "label": None,
        "model_id": model, "tokenizer_id": model, "num_prompts": n, "workload": workload,
        "concurrency": str(concurrency), "run_id": run_id, "request_rate": "inf", "burstiness": 1.0,
        "max_concurrency": concurrency, "duration": duration, "completed": n, "failed": 0,
        "total_input_tokens": sum(r.prompt for r in reqs), "total_output_tokens": out_tokens,
        "request_throughput": n / duration, "request_goodput": None,
        "output_throughput": out_tokens / duration,
        "total_token_throughput": (out_tokens + sum(r.prompt for r in reqs)) / duration,
        "input_lens": [r.prompt for r in reqs], "output_lens": [r.output for r in reqs],
        "ttfts": [round(x, 6) for x in ttfts], "itls": [r.itls for r in reqs],
        "latencies": [round(x, 6) for x in e2el],
        "start_times": [round(BOOT_S + r.send, 6) for r in reqs],
        "queue_times": [round(r.start - r.send, 6) for r in reqs],
        "generated_texts": texts, "errors": [""] * n,
        "max_output_tokens_per_s": float(min(concurrency, n) * round(1 / min(tpots))),
        "max_concurrent_requests": min(concurrency, n), "rtfx": 0.0,
    }
    for name, values, scale in (("ttft", ttfts, 1000), ("tpot", tpots, 1000), ("itl", itls, 1000),
                                ("e2el", e2el, 1000)):
        ms = [v * scale for v in values]
        result[f"mean_{name}_ms"] = statistics.fmean(ms)
        result[f"median_{name}_ms"] = statistics.median(ms)
        result[f"std_{name}_ms"] = statistics.pstdev(ms)
        for q in (50, 90, 99):
            result[f"p{q}_{name}_ms"] = _pct(ms, q)
    return json.dumps(result), result


def bench_printout(result: dict, argv: list[str]) -> str:
    """What `vllm bench serve` prints: its arguments (the ones given), then its report."""
    rows = [("Successful requests:", result["completed"]), ("Failed requests:", result["failed"]),
            ("Maximum request concurrency:", result["max_concurrency"]),
            ("Benchmark duration (s):", f"{result['duration']:.2f}"),
            ("Total input tokens:", result["total_input_tokens"]),
            ("Total generated tokens:", result["total_output_tokens"]),
            ("Request throughput (req/s):", f"{result['request_throughput']:.2f}"),
            ("Output token throughput (tok/s):", f"{result['output_throughput']:.2f}"),
            ("Peak output token throughput (tok/s):", f"{result['max_output_tokens_per_s']:.2f}"),
            ("Peak concurrent requests:", f"{result['max_concurrent_requests']:.2f}"),
            ("Total token throughput (tok/s):", f"{result['total_token_throughput']:.2f}")]
    lines = [namespace(argv),
             "WARNING: vllm bench serve no longer sets temperature==0 (greedy) in requests by default. "
             "The default will be determined on the server side and can be model/API specific. For the "
             "old behavior, include --temperature=0.",
             "Starting initial single prompt test run...", "Skipping endpoint ready check.",
             "Starting main benchmark run...", "Traffic request rate: inf",
             "Burstiness factor: 1.0 (Poisson process)",
             f"Maximum request concurrency: {result['max_concurrency']}",
             "============ Serving Benchmark Result ============"]
    lines += [f"{k:<40} {v:<10}" for k, v in rows]
    for name, title in (("ttft", "Time to First Token"), ("tpot", "Time per Output Token (excl. 1st token)"),
                        ("itl", "Inter-token Latency"), ("e2el", "End-to-end Latency")):
        lines.append(f"{title:-^50}")
        label = name.upper()
        for stat, key in (("Mean", "mean"), ("Median", "median"), ("P50", "p50"), ("P90", "p90"),
                          ("P99", "p99")):
            lines.append(f"{f'{stat} {label} (ms):':<40} {result[f'{key}_{name}_ms']:<10.2f}")
    lines.append("=" * 50)
    return "\n".join(lines) + "\n"


def namespace(argv: list[str]) -> str:
    """The argparse Namespace line the benchmark prints first, for the flags of `argv`."""
    fields: dict[str, object] = {}
    key = None
    for arg in argv:
        if arg.startswith("--"):
            key = arg[2:].replace("-", "_")
            fields[key] = True
        elif key == "metadata":
            fields[key] = [*(fields[key] if isinstance(fields[key], list) else []), arg]
        elif key is not None:
            fields[key] = int(arg) if arg.isdigit() and key not in ("random_range_ratio",) else arg
    return "Namespace(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"


# ---------------------------------------------------------------- /metrics

_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)


def metrics_text(c: Counters, *, model: str, started_unix: float, running: int = 0,
                 kv_usage: float = 0.0) -> str:
    """A /metrics scrape of one engine (Prometheus text), in the families vLLM exposes."""
    labels = f'engine="0",model_name="{model}"'
    out: list[str] = []

    def family(name: str, kind: str, help_text: str, value: float, extra: str = "") -> None:
        out.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}",
                    f"{name}{{{labels}{extra}}} {float(value)!r}"])

    out += ["# HELP python_gc_objects_collected_total Objects collected during gc",
            "# TYPE python_gc_objects_collected_total counter"]
    out += [f'python_gc_objects_collected_total{{generation="{g}"}} {float(9000 // (g + 1) + c.success)!r}'
            for g in range(3)]
    out += ["# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
            "# TYPE process_start_time_seconds gauge", f"process_start_time_seconds {started_unix!r}"]
    family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", running)
    family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", 0)
    family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", round(kv_usage, 6))
    family("vllm:prefix_cache_queries_total", "counter",
           "Prefix cache queries, in terms of number of queried tokens.", c.queries)
    family("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
           c.hits)
    family("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", 0)
    family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", c.prompt)
    family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", c.generation)
    out += ["# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter"]
    for reason in ("stop", "length", "abort", "error"):
        count = c.success if reason == "length" else 0
        out.append(f'vllm:request_success_total{{engine="0",finished_reason="{reason}",model_name="{model}"}} '
                   f"{float(count)!r}")
    name = "vllm:time_to_first_token_seconds"
    out += [f"# HELP {name} Histogram of time to first token in seconds.", f"# TYPE {name} histogram"]
    for le in _BUCKETS:
        below = sum(1 for t in c.ttfts if t <= le)
        out.append(f'{name}_bucket{{engine="0",le="{le}",model_name="{model}"}} {float(below)!r}')
    out.append(f'{name}_bucket{{engine="0",le="+Inf",model_name="{model}"}} {float(len(c.ttfts))!r}')
    out.append(f"{name}_count{{{labels}}} {float(len(c.ttfts))!r}")
    out.append(f"{name}_sum{{{labels}}} {sum(c.ttfts)!r}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- ramp.log and agents logs

def turn_lines(*, workload: str, kind: str, params: dict, seed: int, sessions: int, turns: int,
               output: int, started: datetime, t_start: float,
               reqs: list[tuple[int, int, int, Req, bool | None, str | None]]) -> str:
    """A multi-turn log: the workload line, one line per (session, turn, target, request, needle
    found, answer), the done line."""
    lines = [{"event": "workload", "workload": workload, "kind": kind, "sessions": sessions, "turns": turns,
              "output_tokens": output, "seed": seed, "params": params,
              "started_at": f"{started + timedelta(seconds=t_start):%Y-%m-%dT%H:%M:%SZ}"}]
    for idx, (session, turn, target, r, found, answer) in enumerate(reqs):
        point = f"{workload}__t{turn:02d}" if kind == "ramp" else f"{workload}__s{sessions:02d}"
        lines.append({
            "event": "request", "workload": workload, "kind": kind, "point_id": point, "session": session,
            "turn": turn, "request_idx": idx, "target_tokens": target, "input_tokens": r.prompt,
            "output_tokens": r.output, "ttft_s": round(r.first - r.send, 6),
            "latency_s": round(r.end - r.send, 6), "max_itl_s": round(max(r.itls), 6),
            "started_s": round(r.send - t_start, 6), "needle_ok": found, "answer": answer, "error": ""})
    wall = max(r.end for *_, r, _f, _a in reqs) - t_start
    lines.append({"event": "done", "workload": workload, "requests": len(reqs), "failed": 0,
                  "wall_s": round(wall, 6)})
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)

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
    from stages.tools.synth import campaign as synth
    synth.run(out_dir=Path("data/bench/c1/runs"), runs=300, total_bytes=5 * 10**9, seed=1)
"""
from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path

from stages.core.progress import Progress
from stages.formats.launch_out import launch_text
from stages.formats.run_folder import (CMD_SH, LAUNCH_OUT, META_JSON, NIAH_LOG, SERVER_LOG, iso, record_text,
                                       run_meta)
from stages.tools.synth.synth_bench import WORKLOADS, bench_files, points_of
from stages.tools.synth.synth_log import server_log
from stages.tools.synth.synth_plan import RunPlan, label_tokens, kv_tokens, plan_campaign

SYNTH_VERSION = 3               # 3: meta.json's gpus as the run stage writes them, "0,1"


# ---------------------------------------------------------------- small files

def cmd_text(plan: RunPlan) -> str:
    name, path, _, tp, dp, dcp, _, max_len, _ = plan.model
    gpus = "0,1,2,3" if tp * dp <= 4 else "0,1,2,3,4,5,6,7"
    head = (f"#!/bin/sh\n# engine command of run {plan.run_id}, run from the project root\n"
            f"docker run --rm --gpus '\"device={gpus}\"' --ipc=host -e NCCL_NVLS_ENABLE=0 "
            f"-e NCCL_CUMEM_ENABLE=0 -v /models:/models:ro -p 8000:8000 --name {name} \\\n  ")
    if plan.engine == "sglang":
        return (head + f"{plan.image} python3 -m sglang.launch_server --model-path {path} --tp {tp} "
                f"--dp-size {dp} --context-length {label_tokens(max_len)} --port 8000\n")
    args = f"--tensor-parallel-size {tp}"
    if dp > 1:
        args += f" --data-parallel-size {dp}"
    if dcp > 1:
        args += f" --decode-context-parallel-size {dcp}"
    if plan.style == "v0":
        return head + f"{plan.image} --model {path} {args} --max-model-len {max_len} --max-num-seqs 64\n"
    return (head + f"{plan.image} serve {path} \\\n  {args} --max-model-len {max_len} "
            f"--kv-cache-dtype fp8 --enable-prefix-caching --port 8000\n")


def meta_json(plan: RunPlan, points: int) -> str:
    name, path, layout, tp, dp, _, ctx, max_len, _ = plan.model
    return record_text(run_meta(
        run_id=plan.run_id, spec=f"{name}-{layout}-{ctx}",
        spec_params={"model": name, "layout": layout, "profile": "h200x8",
                     "args": {"--tensor-parallel-size": tp, "--max-model-len": max_len}},
        profile="h200x8", engine=plan.engine, engine_version="0.5.4" if plan.engine == "sglang" else "0.31.0",
        image=plan.image, image_digest=f"sha256:{plan.seed:064x}"[:71], executor="docker",
        gpus=range(min(8, tp * dp)), model=name, model_path=path, layout=layout, ctx=ctx,
        git_sha=f"{plan.seed:040x}"[:40], params_hash=f"{plan.seed:016x}"[:16], node={"cpus": 128, "gpus": 8},
        started_at=plan.started, finished_at=iso(plan.started + timedelta(minutes=40)), points=points))


def launch_out(plan: RunPlan, points: int) -> str:
    ready_s = 300 + plan.seed % 400 + 0.1 * (plan.seed % 10)
    return launch_text(status="ready" if plan.status != "failed" else "failed", ready_s=f"{ready_s:.1f}",
                       engine_kv_tokens=kv_tokens(plan), cross_p2p="ok", gate_score="1.0", points=points,
                       run_status="interrupted" if plan.status == "interrupted" else "complete")


def niah_log(plan: RunPlan) -> str:
    rng = random.Random(plan.seed + 1)
    ctx = label_tokens(plan.model[7])
    lines = []
    for key, depth in enumerate((0.1, 0.25, 0.5, 0.75, 0.9)):
        lines.append(json.dumps({"key": key, "depth": depth, "prompt_tokens": int(ctx * 0.9) - rng.randrange(200),
                                 "ok": True, "latency_s": round(rng.uniform(20, 90), 3),
                                 "answer": f"The magic number is {rng.randrange(10**6, 10**7)}."}))
    lines.append("GATE niah score= 1.0")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- writing

def write_run(plan: RunPlan, runs_dir: Path) -> dict[str, int]:
    """Write one run folder; returns bytes written by kind (log, bench, metrics, other)."""
    folder = runs_dir / plan.run_id
    (folder / "bench").mkdir(parents=True, exist_ok=True)
    sizes = {"log": 0, "bench": 0, "metrics": 0, "other": 0}

    def put(name: str, data: str | bytes, kind: str) -> None:
        raw = data.encode() if isinstance(data, str) else data
        # Written plainly, not with write_once as a run does: the campaign is made again from its
        # seed, and syncing each of its files (15,000 for 300 runs) doubled the time to write it.
        (folder / name).write_bytes(raw)
        sizes[kind] += len(raw)

    put(CMD_SH, cmd_text(plan), "other")
    put(SERVER_LOG, server_log(plan), "log")
    if plan.status == "failed":
        (folder / "bench").rmdir()
        return sizes
    points = points_of(plan)
    put(LAUNCH_OUT, launch_out(plan, points), "other")
    put(NIAH_LOG, niah_log(plan), "other")
    if plan.has_meta:
        put(META_JSON, meta_json(plan, points), "other")
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

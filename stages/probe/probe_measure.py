"""The node probe's measurements: P2P copies between GPU pairs, and the all-reduce sweep with one
spawned process per GPU (`_worker`), timed and converted to bandwidth as nccl-tests does."""
from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from stages.probe.probe_env import SAFE_ENV, recorded_env
from stages.probe.probe_folder import Progress
from stages.probe.probe_plan import group_label

DTYPE_BYTES = 4                      # float32, nccl-tests' default type
MEMORY_SHARE = 0.5                   # a message may take at most this share of a GPU's free memory


def bus_factor(ranks: int) -> float:
    """nccl-tests' all_reduce bus bandwidth factor, 2(n-1)/n."""
    return 2.0 * (ranks - 1) / ranks


def bandwidth_gbs(nbytes: int, time_s: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes), as nccl-tests computes them for all_reduce."""
    algbw = nbytes / 1e9 / time_s
    return algbw, algbw * bus_factor(ranks)


def sig(x: float, digits: int = 6) -> float:
    """`x` to `digits` significant digits (a measurement keeps its precision at any scale)."""
    return float(f"{x:.{digits}g}")


def measure_p2p(n: int, *, nbytes: int, repeats: int, log: Progress) -> Iterator[dict[str, Any]]:
    """Peer access and copy bandwidth for every ordered pair of the `n` visible GPUs."""
    import torch

    bufs = [torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{i}") for i in range(n)]
    dsts = [torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{i}") for i in range(n)]
    try:
        for src in range(n):
            for dst in range(n):
                if src == dst:
                    continue
                peer = bool(torch.cuda.can_device_access_peer(src, dst))
                dsts[dst].copy_(bufs[src])          # first copy: enables peer access, not timed
                times = []
                for _ in range(repeats):
                    torch.cuda.synchronize(src)
                    torch.cuda.synchronize(dst)
                    t0 = time.perf_counter()
                    dsts[dst].copy_(bufs[src])
                    torch.cuda.synchronize(src)
                    torch.cuda.synchronize(dst)
                    times.append(time.perf_counter() - t0)
                median = statistics.median(times)
                row = {"src": src, "dst": dst, "can_access_peer": peer, "bytes": nbytes,
                       "repeats": repeats, "time_us_median": sig(median * 1e6),
                       "copy_gbs": sig(nbytes / 1e9 / median),
                       "copy_gbs_max": sig(nbytes / 1e9 / min(times))}
                log(f"p2p {src}->{dst}: peer={peer} {row['copy_gbs']:.1f} GB/s")
                yield row
    finally:
        del bufs, dsts
        torch.cuda.empty_cache()


def _worker(rank: int, job: dict[str, Any], workdir: str) -> None:
    """One rank of an all-reduce sweep (a spawned process). Rank 0 writes the results."""
    seen = {k: os.environ.get(k) for k in sorted(set(SAFE_ENV) | set(recorded_env(os.environ)))}
    os.environ.update(SAFE_ENV)
    import torch
    import torch.distributed as dist

    gpus, device = job["gpus"], job["device"]
    n = len(gpus)
    Path(workdir, f"env.rank{rank}.json").write_text(json.dumps({"rank": rank, "env": seen}))
    if device == "cuda":
        torch.cuda.set_device(gpus[rank])
        dev = torch.device("cuda", gpus[rank])
    else:
        dev = torch.device("cpu")
    dist.init_process_group(job["backend"], init_method=job["init_method"], rank=rank, world_size=n,
                            timeout=dt.timedelta(seconds=job["timeout_s"]))

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize(dev)

    def across(value: float, op) -> float:
        t = torch.tensor([value], dtype=torch.float64, device=dev)
        dist.all_reduce(t, op=op)
        return float(t.item())

    rows = []
    try:
        for nbytes in job["sizes"]:
            fits = 1.0
            if device == "cuda":
                free, _ = torch.cuda.mem_get_info(dev)
                fits = 1.0 if nbytes <= free * MEMORY_SHARE else 0.0
            if across(fits, dist.ReduceOp.MIN) < 1.0:
                rows.append({"bytes": nbytes, "skipped": "does not fit in free GPU memory"})
                continue
            count = nbytes // DTYPE_BYTES
            x = torch.ones(count, dtype=torch.float32, device=dev)
            dist.all_reduce(x)
            sync()
            correct = bool(x[0].item() == n and x[-1].item() == n)
            x.zero_()
            for _ in range(job["warmup"]):
                dist.all_reduce(x)
            sync()
            if device == "cuda":
                dist.barrier(device_ids=[gpus[rank]])
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(job["iters"]):
                    dist.all_reduce(x)
                end.record()
                end.synchronize()
                elapsed = start.elapsed_time(end) / 1000.0
            else:
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(job["iters"]):
                    dist.all_reduce(x)
                elapsed = time.perf_counter() - t0
            per_iter = elapsed / job["iters"]
            mean = across(per_iter, dist.ReduceOp.SUM) / n
            lo, hi = across(per_iter, dist.ReduceOp.MIN), across(per_iter, dist.ReduceOp.MAX)
            correct = across(1.0 if correct else 0.0, dist.ReduceOp.MIN) == 1.0
            del x
            if device == "cuda":
                torch.cuda.empty_cache()
            rows.append({"bytes": nbytes, "count": count, "time_s": mean, "time_s_min": lo,
                         "time_s_max": hi, "correct": correct})
        if rank == 0:
            Path(workdir, "results.json").write_text(json.dumps(rows))
    finally:
        dist.destroy_process_group()


def _spawn(job: dict[str, Any], workdir: Path, timeout_s: float) -> None:
    """Run one group's ranks as spawned processes; stop them all if one fails or time runs out."""
    import torch.multiprocessing as mp

    ctx = mp.start_processes(_worker, args=(job, str(workdir)), nprocs=len(job["gpus"]),
                             join=False, start_method="spawn")
    deadline = time.monotonic() + timeout_s
    try:
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {group_label(job['gpus'])} did not finish in {timeout_s:.0f} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
                p.join(10)
            if p.is_alive():
                p.kill()
                p.join(10)


def sweep_group(gpus: list[int], *, sizes: list[int], backend: str, device: str, iters: int,
                warmup: int, timeout_s: float, log: Progress) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """All-reduce over `gpus` at every size: (allreduce.jsonl rows, the environment each rank saw)."""
    label, n = group_label(gpus), len(gpus)
    with tempfile.TemporaryDirectory(prefix="probe-") as tmp:
        work = Path(tmp)
        job = {"gpus": gpus, "sizes": sizes, "backend": backend, "device": device, "iters": iters,
               "warmup": warmup, "timeout_s": timeout_s,
               "init_method": (work / "rendezvous").resolve().as_uri()}
        log(f"all-reduce group {label}: {n} ranks, {backend} on {device}, {len(sizes)} sizes")
        _spawn(job, work, timeout_s)
        results = json.loads((work / "results.json").read_text())
        seen = [json.loads(p.read_text()) for p in sorted(work.glob("env.rank*.json"))]
    rows = []
    for r in results:
        if "skipped" in r:
            log(f"all-reduce group {label} {r['bytes']} B: skipped, {r['skipped']}")
            continue
        algbw, busbw = bandwidth_gbs(r["bytes"], r["time_s"], n)
        row = {"group": label, "gpus": gpus, "ranks": n, "backend": backend, "device": device,
               "dtype": "float32", "op": "sum", "bytes": r["bytes"], "count": r["count"],
               "iters": iters, "warmup": warmup, "time_us": sig(r["time_s"] * 1e6),
               "time_us_min": sig(r["time_s_min"] * 1e6), "time_us_max": sig(r["time_s_max"] * 1e6),
               "algbw_gbs": sig(algbw), "busbw_gbs": sig(busbw), "correct": r["correct"]}
        log(f"all-reduce group {label} {r['bytes']} B: {row['time_us']:.1f} us, "
            f"algbw {algbw:.2f} GB/s, busbw {busbw:.2f} GB/s{'' if r['correct'] else ', WRONG SUM'}")
        rows.append(row)
    return rows, seen

"""The node probe: what the GPUs are, how they are linked, and how fast they talk, measured.

Each call makes a new node folder `<out>/<node_kind>__<MMDD-HHMMSS>/` (UTC) and never touches an
earlier one; every file is created once ("x") and made read-only at the end:
  gpus.csv         `nvidia-smi --query-gpu=... --format=csv`, as printed
  topo.txt         `nvidia-smi topo -m`, as printed
  nvlink.txt       `nvidia-smi nvlink --status`, as printed (a failure is kept in meta.json)
  p2p.jsonl        one object per ordered GPU pair: peer access, measured copy bandwidth
  allreduce.jsonl  one object per (group, message size): time, algbw and busbw as nccl-tests
                   defines them for all_reduce
  env.json         driver, CUDA, torch, NCCL and Python versions, every NCCL_* and CUDA_* variable
  meta.json        what was asked (groups, sizes, iterations), what ran, and how each part ended
  probe.log        one line per step
A part that cannot run on this machine (no GPU, a single GPU) leaves its file out and says why in
meta.json and probe.log.

NVLink multicast stays off: the probe sets NCCL_NVLS_ENABLE=0 (and the matching PyTorch and
NVSHMEM switches) in its own environment before any child starts, so every child inherits them,
and each child sets them again before it touches a GPU. Existing NCCL_* values are kept. The probe
only reads GPU settings (nvidia-smi queries); it never resets a GPU or changes its clocks or modes.

    python -m stages.tools.node_probe --out data/nodes --node-kind h200x2
    python -m stages.tools.node_probe --out /tmp/nodes --node-kind cpu --backend gloo --device cpu --world-size 2
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from stages.core.config import CampaignError
from stages.core.provenance import git_sha

SCHEMA_VERSION = 1
# Forced in the probe's environment and in every child's: NVLink multicast off everywhere.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ENV_PREFIXES = ("NCCL_", "CUDA_", "TORCH_SYMM_MEM_", "NVSHMEM_")
GPU_QUERY = "index,name,uuid,pci.bus_id,memory.total,driver_version,power.limit,clocks.max.sm"
COMMANDS = {
    "gpus.csv": ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv"],
    "topo.txt": ["nvidia-smi", "topo", "-m"],
    "nvlink.txt": ["nvidia-smi", "nvlink", "--status"],
}
QUAD = 4
DEFAULTS = {
    "cuda": {"backend": "nccl", "sizes": "1MiB..4GiB", "iters": 20, "warmup": 5},
    "cpu": {"backend": "gloo", "sizes": "1KiB..1MiB", "iters": 5, "warmup": 2},
}
P2P_BYTES = 256 * 2**20
P2P_REPEATS = 5
GROUP_TIMEOUT_S = 600.0
DTYPE_BYTES = 4                      # float32, nccl-tests' default type
MEMORY_SHARE = 0.5                   # a message may take at most this share of a GPU's free memory
_UNITS = {"": 1, "B": 1, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
          "K": 2**10, "M": 2**20, "G": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9}
_SIZE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")
_KIND = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

Progress = Callable[[str], None]


# ---------------------------------------------------------------- small pure helpers

def safe_env(base: Mapping[str, str]) -> dict[str, str]:
    """`base` with NVLink multicast switched off; every other variable kept as it is."""
    return {**base, **SAFE_ENV}


def recorded_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables env.json keeps: NCCL_*, CUDA_* and the multicast switches."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES)}


def parse_size(text: str | int) -> int:
    """`4GiB` -> 4294967296; a bare number is bytes."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    unit = m.group(2).upper() if m else None
    if not m or unit not in _UNITS:
        raise CampaignError(f"message size {text!r} not understood (e.g. 1024, 64KiB, 1MiB, 4GiB)")
    return int(m.group(1)) * _UNITS[unit]


def size_sweep(spec: str | Sequence[str | int]) -> list[int]:
    """`1MiB..4GiB` -> every power of two from 1 MiB to 4 GiB; a list is taken as given."""
    if isinstance(spec, str) and ".." in spec:
        lo, hi = (parse_size(s) for s in spec.split("..", 1))
        if lo <= 0 or hi < lo:
            raise CampaignError(f"size range {spec!r}: need 0 < low <= high")
        sizes, s = [], lo
        while s <= hi:
            sizes.append(s)
            s *= 2
        return sizes
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    sizes = sorted({parse_size(s) for s in items})
    if not sizes or sizes[0] <= 0:
        raise CampaignError(f"message sizes {spec!r}: need at least one size above 0")
    return sizes


def parse_group(text: str) -> list[int]:
    """`0-3` -> [0, 1, 2, 3]; `0,2,4` -> [0, 2, 4]."""
    try:
        if "-" in text and "," not in text:
            lo, hi = (int(s) for s in text.split("-", 1))
            return list(range(lo, hi + 1))
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise CampaignError(f"GPU group {text!r} not understood (e.g. 0-3 or 0,1,2,3)") from None


def group_label(gpus: Sequence[int]) -> str:
    """[0, 1, 2, 3] -> '0-3'; [0, 2] -> '0,2'."""
    if len(gpus) > 1 and list(gpus) == list(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}"
    return ",".join(str(g) for g in gpus)


def auto_groups(n: int) -> list[list[int]]:
    """Each quad that exists (GPUs 0-3, 4-7, ...), then the whole node; no group of one GPU."""
    groups = [list(range(q, q + QUAD)) for q in range(0, n - QUAD + 1, QUAD)]
    whole = list(range(n))
    if n >= 2 and whole not in groups:
        groups.append(whole)
    return groups


def resolve_groups(groups: str | Sequence[Sequence[int]] | None, n: int) -> tuple[list[list[int]], list[str]]:
    """The groups to sweep on a machine of `n` devices, and why any asked-for group was left out."""
    if groups is None or groups == "auto":
        chosen = auto_groups(n)
        return chosen, ([] if chosen else [f"{n} device(s): an all-reduce needs a group of at least 2"])
    if isinstance(groups, str):
        raise CampaignError(f"groups {groups!r}: give 'auto' or lists of GPU indices")
    chosen, skipped = [], []
    for g in groups:
        gpus = parse_group(g) if isinstance(g, str) else [int(i) for i in g]
        label = group_label(gpus)
        if len(gpus) < 2:
            skipped.append(f"group {label}: an all-reduce needs at least 2 GPUs")
        elif len(set(gpus)) != len(gpus):
            skipped.append(f"group {label}: a GPU appears twice")
        elif max(gpus) >= n or min(gpus) < 0:
            skipped.append(f"group {label}: this machine has {n} device(s)")
        elif gpus not in chosen:
            chosen.append(gpus)
    return chosen, skipped


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


def node_id(kind: str, now: dt.datetime) -> str:
    if not _KIND.match(kind) or "__" in kind:
        raise CampaignError(f"node kind {kind!r} cannot be part of a node id "
                            "(letters, digits, '.', '_', '-'; no '__')")
    return f"{kind}__{now.astimezone(dt.timezone.utc):%m%d-%H%M%S}"


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@contextlib.contextmanager
def forced_env(values: Mapping[str, str]) -> Iterator[dict[str, str | None]]:
    """Set `values` in os.environ (children inherit them) and restore the old ones afterwards.
    Yields what each variable was before."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield before
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ---------------------------------------------------------------- the folder

class NodeLog:
    """probe.log: one UTC-stamped line per step, also passed to `progress`."""

    def __init__(self, path: Path, progress: Progress):
        self.file = path.open("x", buffering=1)
        self.progress = progress

    def __call__(self, msg: str) -> None:
        self.file.write(f"{iso(utc_now())} {msg}\n")
        self.progress(msg)

    def close(self) -> None:
        self.file.close()


def write_once(path: Path, text: str) -> None:
    with path.open("x") as f:
        f.write(text)


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    write_once(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def run_command(argv: Sequence[str], env: Mapping[str, str], timeout_s: float = 60.0) -> tuple[int | None, bytes, str | None]:
    """(exit status, stdout+stderr, error) of a read-only query; never raises."""
    try:
        out = subprocess.run(list(argv), env=dict(env), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
    except FileNotFoundError:
        return None, b"", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return None, b"", f"timed out after {timeout_s:.0f} s"
    except OSError as exc:
        return None, b"", f"{type(exc).__name__}: {exc}"
    return out.returncode, out.stdout, None


# ---------------------------------------------------------------- measurements (torch)

def versions(gpus_csv: bytes | None) -> dict[str, Any]:
    import torch

    nccl = None
    if torch.cuda.is_available():
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except (AttributeError, RuntimeError):
            nccl = None
    driver = None
    if gpus_csv:
        from stages.ingest.parsers.node_smi import parse_gpus_csv
        rows, _ = parse_gpus_csv(gpus_csv)
        driver = next((r.get("driver_version") for r in rows if r.get("driver_version")), None)
    return {"driver": driver, "cuda": torch.version.cuda, "torch": torch.__version__, "nccl": nccl,
            "python": platform.python_version(), "platform": platform.platform(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0}


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


# ---------------------------------------------------------------- the stage

def run(*, out_dir: Path, node_kind: str, groups: str | Sequence[Sequence[int]] | None = "auto",
        sizes: str | Sequence[str | int] | None = None, backend: str | None = None,
        device: str = "cuda", iters: int | None = None, warmup: int | None = None,
        world_size: int | None = None, p2p_bytes: int = P2P_BYTES, p2p_repeats: int = P2P_REPEATS,
        group_timeout_s: float = GROUP_TIMEOUT_S, env: Mapping[str, str] | None = None,
        progress: Progress = lambda s: None, now: dt.datetime | None = None) -> Path:
    """Probe this machine into a new node folder under `out_dir`; returns the folder."""
    if device not in DEFAULTS:
        raise CampaignError(f"device {device!r}: use cuda or cpu")
    defaults = DEFAULTS[device]
    backend = backend or defaults["backend"]
    if device == "cpu" and backend != "gloo":
        raise CampaignError(f"backend {backend!r} cannot run on cpu; use gloo")
    size_list = size_sweep(sizes if sizes is not None else defaults["sizes"])
    iters = int(iters if iters is not None else defaults["iters"])
    warmup = int(warmup if warmup is not None else defaults["warmup"])
    if iters < 1 or warmup < 0:
        raise CampaignError("iters must be at least 1 and warmup at least 0")

    started = now or utc_now()
    folder = Path(out_dir) / node_id(node_kind, started)
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        raise CampaignError(f"node folder {folder} already exists; node ids are never reused") from None

    meta: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "node_id": folder.name, "node_kind": node_kind,
        "started_at": iso(started), "backend": backend, "device": device, "sizes": size_list,
        "iters": iters, "warmup": warmup, "groups_asked": groups if groups is not None else "auto",
        "p2p": {"bytes": p2p_bytes, "repeats": p2p_repeats}, "commands": [], "groups": [],
        "skipped": [], "git_sha": git_sha(Path.cwd()), "status": "failed",
    }
    log = NodeLog(folder / "probe.log", progress)
    try:
        with forced_env({**(env or {}), **SAFE_ENV}) as before:
            meta["env_forced"] = {k: {"was": before[k], "now": v} for k, v in SAFE_ENV.items()
                                  if before[k] != v}
            log(f"node {folder.name}: {backend} on {device}; NVLink multicast off "
                f"({', '.join(f'{k}={v}' for k, v in SAFE_ENV.items())})")
            _probe(folder=folder, meta=meta, groups=groups, sizes=size_list, backend=backend,
                   device=device, iters=iters, warmup=warmup, world_size=world_size,
                   p2p_bytes=p2p_bytes, p2p_repeats=p2p_repeats, group_timeout_s=group_timeout_s,
                   log=log)
        meta["status"] = "complete" if not any(g["status"] == "failed" for g in meta["groups"]) else "partial"
    except KeyboardInterrupt:
        meta["status"] = "interrupted"
        log("interrupted")
        raise
    except Exception as exc:
        meta["error"] = str(exc) if isinstance(exc, CampaignError) else f"{type(exc).__name__}: {exc}"
        log(f"failed: {meta['error']}")
        raise
    finally:
        meta["finished_at"] = iso(utc_now())
        write_once(folder / "meta.json", json.dumps(meta, indent=2, sort_keys=True) + "\n")
        log(f"done: {meta['status']}")
        log.close()
        for p in folder.iterdir():
            p.chmod(0o444)
    return folder


def _probe(*, folder: Path, meta: dict[str, Any], groups, sizes: list[int], backend: str, device: str,
           iters: int, warmup: int, world_size: int | None, p2p_bytes: int, p2p_repeats: int,
           group_timeout_s: float, log: Progress) -> None:
    import torch

    gpus_csv = None
    if device == "cuda":
        if not torch.cuda.is_available():
            raise CampaignError("device cuda: torch sees no GPU here (use --device cpu --backend gloo)")
        n = torch.cuda.device_count()
        for name, argv in COMMANDS.items():
            rc, output, error = run_command(argv, os.environ)
            meta["commands"].append({"file": name, "argv": argv, "rc": rc, "error": error})
            if error is None:
                write_once(folder / name, output.decode("utf-8", errors="replace"))
            log(f"{' '.join(argv[:3])}: " + (error or f"exit {rc}, {len(output)} bytes -> {name}"))
            if name == "gpus.csv" and rc == 0:
                gpus_csv = output
    else:
        n = int(world_size or 2)
        meta["skipped"].append("nvidia-smi queries and p2p: device cpu")
        log(f"device cpu: {n} ranks; nvidia-smi and p2p skipped")
    meta["device_count"] = n

    info = versions(gpus_csv)
    env_json = {"schema_version": SCHEMA_VERSION, **info, "env": recorded_env(os.environ),
                "env_forced": meta["env_forced"]}
    write_once(folder / "env.json", json.dumps(env_json, indent=2, sort_keys=True) + "\n")
    log(f"torch {info['torch']}, CUDA {info['cuda']}, NCCL {info['nccl']}, driver {info['driver']}")

    if device == "cuda":
        if n < 2:
            meta["skipped"].append(f"p2p: {n} GPU, no pairs")
            log(f"p2p skipped: {n} GPU, no pairs")
        else:
            with (folder / "p2p.jsonl").open("x", buffering=1) as f:
                for row in measure_p2p(n, nbytes=p2p_bytes, repeats=p2p_repeats, log=log):
                    f.write(json.dumps(row, sort_keys=True) + "\n")

    chosen, skipped = resolve_groups(groups, n)
    meta["skipped"] += [f"all-reduce {s}" for s in skipped]
    for s in skipped:
        log(f"all-reduce skipped: {s}")
    if not chosen:
        return
    with (folder / "allreduce.jsonl").open("x", buffering=1) as f:
        for gpus in chosen:
            entry: dict[str, Any] = {"group": group_label(gpus), "gpus": gpus}
            try:
                rows, seen = sweep_group(gpus, sizes=sizes, backend=backend, device=device, iters=iters,
                                         warmup=warmup, timeout_s=group_timeout_s, log=log)
            except Exception as exc:   # one group's failure is a finding; the others still run
                entry.update(status="failed", error=f"{type(exc).__name__}: {exc}".strip()[:2000])
                log(f"all-reduce group {entry['group']} failed: {entry['error'].splitlines()[0]}")
                meta["groups"].append(entry)
                continue
            for row in rows:
                f.write(json.dumps(row, sort_keys=True) + "\n")
            entry.update(status="ok", sizes_measured=len(rows), child_env=seen)
            meta["groups"].append(entry)


# ---------------------------------------------------------------- command line

def _params_probe(root: Path) -> tuple[dict[str, Any], Path | None, dict[str, Any]]:
    """params.yaml `probe:` settings, `paths.nodes`, and the profiles (all optional here)."""
    if not (root / "params.yaml").is_file():
        return {}, None, {}
    from stages.core.config import load_params

    params = load_params(root)
    nodes = (params.get("paths") or {}).get("nodes")
    return params.get("probe") or {}, (root / nodes if nodes else None), params.get("profiles") or {}


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m stages.tools.node_probe",
        description="Probe the node's GPUs (inventory, topology, P2P, all-reduce bandwidth) into a "
                    "new write-once node folder. Example: python -m stages.tools.node_probe --out data/nodes "
                    "--node-kind h200x2")
    ap.add_argument("--out", type=Path, help="folder that holds node folders (default: params paths.nodes)")
    ap.add_argument("--node-kind", required=True, help="first part of the node id, e.g. h200x8")
    ap.add_argument("--group", action="append", dest="groups", metavar="GPUS",
                    help="a GPU group to all-reduce over, e.g. 0-3 or 0,1; repeat for more "
                         "(default: params probe.groups, else auto = each quad and the whole node)")
    ap.add_argument("--sizes", help="message sizes: a range of powers of two (1MiB..4GiB) or a list "
                                    "(default: params probe.sizes, else 1MiB..4GiB on cuda, 1KiB..1MiB on cpu)")
    ap.add_argument("--backend", choices=("nccl", "gloo"), help="default: nccl on cuda, gloo on cpu")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--world-size", type=int, default=2, help="ranks on --device cpu (default 2)")
    ap.add_argument("--iters", type=int, help="timed iterations per size (default 20 cuda, 5 cpu)")
    ap.add_argument("--warmup", type=int, help="untimed iterations per size (default 5 cuda, 2 cpu)")
    ap.add_argument("--p2p-mib", type=int, default=P2P_BYTES // 2**20, help="P2P copy size in MiB (default 256)")
    ap.add_argument("--p2p-repeats", type=int, default=P2P_REPEATS, help="timed P2P copies per pair (default 5)")
    ap.add_argument("--group-timeout-s", type=float, default=GROUP_TIMEOUT_S,
                    help="stop a group's ranks after this many seconds (default 600)")
    ap.add_argument("--profile", help="apply this params profile's env (NCCL_* settings) while probing")
    ap.add_argument("--root", type=Path, default=Path("."), help="project root (where params.yaml is)")
    args = ap.parse_args(argv)

    def say(msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)

    try:
        settings, nodes_dir, profiles = _params_probe(args.root)
        out = args.out or nodes_dir
        if out is None:
            raise CampaignError("no output folder: give --out or set paths.nodes in params.yaml")
        env = None
        if args.profile:
            if args.profile not in profiles:
                raise CampaignError(f"unknown profile {args.profile!r} (params.yaml profiles: "
                                    f"{', '.join(profiles) or 'none'})")
            env = {str(k): str(v) for k, v in (profiles[args.profile].get("env") or {}).items()}
        groups = ([parse_group(g) for g in args.groups] if args.groups
                  else settings.get("groups", "auto"))
        folder = run(out_dir=out, node_kind=args.node_kind, groups=groups,
                     sizes=args.sizes or (settings.get("sizes") if args.device == "cuda" else None),
                     backend=args.backend, device=args.device,
                     iters=args.iters if args.iters is not None else (settings.get("iters") if args.device == "cuda" else None),
                     warmup=args.warmup if args.warmup is not None else (settings.get("warmup") if args.device == "cuda" else None),
                     world_size=args.world_size, p2p_bytes=args.p2p_mib * 2**20,
                     p2p_repeats=args.p2p_repeats, group_timeout_s=args.group_timeout_s, env=env,
                     progress=say)
    except CampaignError as exc:
        print(f"probe: error: {exc}", file=sys.stderr)
        return 2
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())

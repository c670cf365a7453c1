"""The node probe: what the GPUs are, how they are linked, and how fast they talk, measured.

Each call makes a new node folder `<out>/<node_kind>__<MMDD-HHMMSS>/` (UTC) and never touches an
earlier one; every file is created once (written whole, or streamed) and made read-only at the end:
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

This module runs the probe and its command line; the parts are in probe_plan (sizes, groups),
probe_env (multicast off, recorded variables), probe_inventory (nvidia-smi queries, versions),
probe_measure (P2P copies, the per-GPU all-reduce workers) and probe_folder (node id, log, files).

    python -m stages.probe.node_probe --out data/nodes --node-kind h200x2
    python -m stages.probe.node_probe --out /tmp/nodes --node-kind cpu --backend gloo --device cpu --world-size 2
"""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from stages.core.config import CampaignError
from stages.core.provenance import git_sha
from stages.probe.probe_env import SAFE_ENV, forced_env, recorded_env
from stages.formats.run_folder import SCHEMA_VERSION, iso, record_text, utc_now
from stages.formats.sealed import write_once
from stages.probe.probe_folder import NodeLog, Progress, node_id
from stages.probe.probe_inventory import COMMANDS, run_command, versions
from stages.probe.probe_measure import measure_p2p, sweep_group
from stages.probe.probe_plan import group_label, parse_group, resolve_groups, size_sweep

DEFAULTS = {
    "cuda": {"backend": "nccl", "sizes": "1MiB..4GiB", "iters": 20, "warmup": 5},
    "cpu": {"backend": "gloo", "sizes": "1KiB..1MiB", "iters": 5, "warmup": 2},
}
P2P_BYTES = 256 * 2**20
P2P_REPEATS = 5
GROUP_TIMEOUT_S = 600.0


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
        write_once(folder / "meta.json", record_text(meta), scratch=folder.parent)
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
                write_once(folder / name, output.decode("utf-8", errors="replace"), scratch=folder.parent)
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
    write_once(folder / "env.json", record_text(env_json), scratch=folder.parent)
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

def append_ledger(ledger: Path, folder: Path, root: Path) -> dict[str, Any]:
    """Append one JSON line naming a new node folder to `ledger` (the DVC stage's output, which
    DVC keeps between runs: every probe of the node is listed, the earlier ones never rewritten)."""
    meta = json.loads((folder / "meta.json").read_text())
    try:
        where = folder.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        where = str(folder)
    entry = {"node_id": meta["node_id"], "folder": where, "status": meta["status"],
             "started_at": meta["started_at"], "finished_at": meta.get("finished_at")}
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with ledger.open("a") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
    return entry


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
        prog="python -m stages.probe.node_probe",
        description="Probe the node's GPUs (inventory, topology, P2P, all-reduce bandwidth) into a "
                    "new write-once node folder. Example: python -m stages.probe.node_probe --out data/nodes "
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
    ap.add_argument("--ledger", type=Path, help="append a JSON line naming the new folder to this file "
                                                "(the DVC stage's output, e.g. data/ledger/probe__h200x8.jsonl)")
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
        if args.ledger:
            append_ledger(args.root / args.ledger, folder, args.root)
    except CampaignError as exc:
        print(f"probe: error: {exc}", file=sys.stderr)
        return 2
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())

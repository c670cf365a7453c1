"""The engine's profiler around a benchmark point, on request: a workload with `profile: true`
(every point of it) or `profile: [1, 16]` (the points of those concurrencies).

A spec with such a workload starts its engine with the profiler armed, writing into a scratch
folder of the run folder (ENGINE_FOLDER, mounted read-write into a container):

    vLLM    --profiler-config '{"profiler": "torch", "torch_profiler_dir": <scratch>, ...}'
    SGLang  SGLANG_TORCH_PROFILER_DIR=<scratch>

Around a profiled point the run stage POSTs `/start_profile`, runs the point, and POSTs
`/stop_profile`. The engine records a short window of the point: the profile's `profiler`
settings bound it in engine iterations (`delay_iterations` skipped first, then at most
`max_iterations` recorded; vLLM stops by itself there, SGLang's `num_steps`). The trace files the
engine wrote, one per worker (plus none from vLLM's API server: `ignore_frontend`), are then moved
into the run folder as

    profile/<point_id>.<the engine's file name, ending .pt.trace.json.gz>

where ingest reads them (stages/ingest/parsers/profile_trace.py); a CPU worker's table of operator
totals beside its trace (`<worker>.profiler_out.txt`) is kept the same way. A file over `max_trace_mb` is
not kept, and launch.out says so; so does a profiler that would not start or stop. Nothing here
fails the point: a point without its trace is still a measured point.

Profile settings (all optional; these are the defaults):
    profiler: {delay_iterations: 0, max_iterations: 64, max_trace_mb: 64}
"""
from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import httpx

from stages.core.config import CampaignError
from stages.formats.run_folder import PROFILE_FOLDER, PROFILE_TABLE_SUFFIX

SETTING = "profiler"                  # the profile's key
WORKLOAD_KEY = "profile"              # a workload's key: true, or a list of concurrencies
ENGINE_FOLDER = ".engine"             # the engine's scratch folder, under profile/ of the run folder
TRACE_SUFFIX = ".pt.trace.json.gz"    # what ingest reads (an SGLang trace is renamed to it)
DEFAULTS = {"delay_iterations": 0, "max_iterations": 64, "max_trace_mb": 64}
STOP_TIMEOUT_S = 600.0                # writing a GPU trace of many kernels takes a while
SETTLE_S = 2.0                        # a file's size unchanged this long: the engine is done with it


@dataclass(frozen=True)
class Settings:
    delay_iterations: int
    max_iterations: int
    max_trace_mb: int


def settings(profile: dict) -> Settings:
    """The profile's `profiler` settings over DEFAULTS; a clear error for a bad one."""
    given = profile.get(SETTING) or {}
    if not isinstance(given, dict):
        raise CampaignError(f"{SETTING} must be a mapping, not {given!r}")
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise CampaignError(f"{SETTING}: unknown setting(s) {', '.join(unknown)} "
                            f"(known: {', '.join(DEFAULTS)})")
    merged = {**DEFAULTS, **given}
    for key, value in merged.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < (1 if key != "delay_iterations" else 0):
            raise CampaignError(f"{SETTING}.{key} must be a {'non-negative' if key == 'delay_iterations' else 'positive'}"
                                f" integer, not {value!r}")
    return Settings(**merged)


def profiles(workload: dict, concurrency: int) -> bool:
    """Whether the point of `workload` at `concurrency` is profiled."""
    flag = workload.get(WORKLOAD_KEY, False)
    return flag is True or (isinstance(flag, list) and concurrency in flag)


def wanted(workloads: dict[str, dict]) -> bool:
    """Whether any workload of a spec asks for a profile (the engine then starts with it armed)."""
    return any(w.get(WORKLOAD_KEY) not in (None, False, []) for w in workloads.values())


def scratch(folder: Path) -> Path:
    """Where the engine writes its traces: a folder of the run folder, emptied after each point."""
    return folder / PROFILE_FOLDER / ENGINE_FOLDER


def engine_path(scratch_dir: Path, root: Path, executor: str) -> Path:
    """The scratch folder as the engine is told it: relative to the project root for a local
    engine (whose working folder that is), absolute for a container's mount."""
    root = root.resolve()
    if executor == "local" and scratch_dir.is_relative_to(root):
        return scratch_dir.relative_to(root)
    return scratch_dir


def launch_additions(engine: str, scratch_dir: Path, cfg: Settings) -> tuple[dict, dict]:
    """(args, env) to add to the engine's launch so that its profiler writes into `scratch_dir`
    (as the engine sees it: see engine_path)."""
    if engine == "vllm":
        config = {"profiler": "torch", "torch_profiler_dir": str(scratch_dir),
                  "torch_profiler_with_stack": False, "ignore_frontend": True,
                  # a GPU worker's table of kernel totals, made from the trace (a CPU worker
                  # writes its own regardless: kept, see collect)
                  "torch_profiler_dump_cuda_time_total": False,
                  "delay_iterations": cfg.delay_iterations, "max_iterations": cfg.max_iterations}
        return {"--profiler-config": json.dumps(config, separators=(",", ":"), sort_keys=True)}, {}
    if engine == "sglang":
        return {}, {"SGLANG_TORCH_PROFILER_DIR": str(scratch_dir)}
    raise CampaignError(f"no profiler known for engine {engine!r}")


def start_body(engine: str, scratch_dir: Path, cfg: Settings) -> dict | None:
    """The JSON of `/start_profile`: vLLM takes its window from the launch, SGLang from here."""
    if engine == "sglang":
        return {"output_dir": str(scratch_dir.resolve()), "num_steps": cfg.max_iterations,
                "start_step": cfg.delay_iterations or None, "activities": ["CPU", "GPU"]}
    return None


@dataclass
class Outcome:
    """What a profiled point kept: trace files (names in the run folder) and problems met."""
    kept: list[str]
    problems: list[str]


def collect(folder: Path, point_id: str, cfg: Settings) -> Outcome:
    """Move the traces the engine wrote into `scratch(folder)` to profile/<point_id>.<name>
    (ending TRACE_SUFFIX); a file over the size cap, or not a trace, is removed and named in
    the problems. The scratch folder is left empty."""
    src = scratch(folder)
    kept, problems = [], []
    if not src.is_dir():
        return Outcome(kept, [f"the engine wrote no trace ({src.name} missing)"])
    _settle(src)
    cap = cfg.max_trace_mb * 1024 * 1024
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        size = path.stat().st_size
        name = _trace_name(path.name)
        if name is None:
            problems.append(f"not a trace file: {path.name}")
        elif size > cap:
            problems.append(f"{path.name}: {size} bytes, over max_trace_mb {cfg.max_trace_mb}; not kept")
        else:
            dest = folder / PROFILE_FOLDER / f"{point_id}.{name}"
            if not dest.exists():
                path.rename(dest)
                kept.append(f"{PROFILE_FOLDER}/{dest.name}")
                continue
            problems.append(f"{dest.name} exists already; not kept")
        path.unlink()
    for d in sorted((p for p in src.rglob("*") if p.is_dir()), reverse=True):
        d.rmdir()
    if not kept and not problems:
        problems.append("the engine wrote no trace")
    return Outcome(kept, problems)


def tidy(scratch_dir: Path) -> None:
    """Remove the engine's scratch folder where it is empty, and profile/ with it where that is
    empty too (no point kept a trace); anything the engine left there stays, for ingest to name."""
    for d in (scratch_dir, scratch_dir.parent):
        with contextlib.suppress(OSError):
            d.rmdir()


def _trace_name(name: str) -> str | None:
    """The engine's file name as kept: vLLM's `*.pt.trace.json.gz` (and a CPU worker's table made
    from it) as it is, SGLang's `*.trace.json.gz` with `.pt` put in; None for anything else."""
    if name.endswith((TRACE_SUFFIX, PROFILE_TABLE_SUFFIX)):
        return name
    if name.endswith(".trace.json.gz"):
        return name.removesuffix(".trace.json.gz") + TRACE_SUFFIX
    return None


def _settle(src: Path, timeout_s: float = 60.0) -> None:
    """Wait until no file of `src` grows for SETTLE_S (an engine may finish a write after it
    answered), at most `timeout_s`."""
    def sizes():
        return {p: p.stat().st_size for p in src.rglob("*") if p.is_file()}
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        now = sizes()
        if now == last:
            return
        last = now
        time.sleep(SETTLE_S)


@contextlib.contextmanager
def profiling(client: httpx.Client, base_url: str, engine: str, folder: Path, point_id: str,
              cfg: Settings, note: Callable[[str, str], None]) -> Iterator[None]:
    """The engine's profiler around the body; `note(key, value)` is told what was kept
    (`profile`) or went wrong (`profile_error`), for launch.out, each value opening with the
    point id. A profiler that would not start leaves the point unprofiled, not failed."""
    scratch(folder).mkdir(parents=True, exist_ok=True)
    started = _post(client, f"{base_url}/start_profile", start_body(engine, scratch(folder), cfg),
                    timeout=60.0)
    if started is not None:
        note("profile_error", f"{point_id} start_profile: {started}")
    try:
        yield
    finally:
        if started is None:
            stopped = _post(client, f"{base_url}/stop_profile", None, timeout=STOP_TIMEOUT_S)
            if stopped is not None:
                note("profile_error", f"{point_id} stop_profile: {stopped}")
        outcome = collect(folder, point_id, cfg)
        if outcome.kept:
            note("profile", f"{point_id} {' '.join(outcome.kept)}")
        for problem in outcome.problems if started is None else []:
            note("profile_error", f"{point_id} {problem}")


def _post(client: httpx.Client, url: str, body: dict | None, *, timeout: float) -> str | None:
    """POST; None when the engine answered 2xx, else what went wrong, in one line."""
    try:
        resp = client.post(url, json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if resp.is_success else f"HTTP {resp.status_code} {resp.text.strip()[:200]}"

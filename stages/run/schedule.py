"""Run specs over GPU sets: quad-sized specs two at a time, whole-node specs on the whole node.

The node has two quads (GPUs 0-3 and 4-7, NVLink inside each). A spec needing at most four GPUs
takes a free quad; one needing more waits until the whole node is free. Specs start in the order
given (first come, first served: a waiting whole-node spec is not overtaken, so it cannot starve).
A node without GPUs (local-cpu) has one slot, so its specs run one at a time. Each slot has its
own port (the profile's port plus the slot's index: engines share the host network), and each
engine its own container, named after its run id. An engine launch is the expensive part, so each
spec is one launch serving its gate and all of its workloads. `plan` computes the timeline from
each spec's estimate (`est_minutes`) for --dry-run; `execute` runs the same policy for real, one
`campaign run <spec> --gpus ... --port ...` process per spec.

The run stage (`campaign schedule`) keeps a ledger of what it ran: per spec, the fingerprint of
what decides what was measured (the spec, its workloads, the gate, the image, the engine settings
of its profile and params.yaml's `protocol`) and the run it ended in. A spec whose entry has the
same fingerprint and a finished run is not launched again.
"""
from __future__ import annotations

import hashlib
import heapq
import json
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from stages.core.config import CampaignError, Paths, profile as get_profile, profile_workloads
from stages.core.files import write_atomic
from stages.core.gate import gate_settings
from stages.run import fit_check
from stages.run.quads import QUAD_SIZE, QUADS

DEFAULT_MINUTES = 30.0
LEDGER_FILE = "schedule.json"        # in paths.ledger; the run stage's output (dvc.yaml)
# What of a profile decides what its engines measured (not its port, timeouts or derive's rules),
# and what of a spec does not (the scheduler's estimate; launching it though the plan says it cannot fit).
MEASURED_PROFILE_KEYS = ("executor", "engine", "image", "docker", "env")
UNMEASURED_SPEC_KEYS = ("est_minutes", "force")


@dataclass(frozen=True)
class Job:
    spec: str
    gpus_needed: int
    minutes: float


@dataclass(frozen=True)
class Slot:
    spec: str
    gpus: tuple[int, ...]
    start_min: float
    end_min: float
    index: int = 0                   # which slot: the quad's index, 0 for the whole node


def node_quads(gpus_per_node: int) -> tuple[tuple[int, ...], ...]:
    """The node's quads; a node without GPUs is one slot with none."""
    n = int(gpus_per_node or 0)
    return tuple(tuple(range(i, min(i + QUAD_SIZE, n))) for i in range(0, n, QUAD_SIZE)) or ((),)


def jobs_from(params: dict, names: list[str], quads=QUADS, minutes: dict[str, float] | None = None
              ) -> list[Job]:
    """The specs as jobs: their GPUs, and their minutes (`est_minutes`, else `minutes`: the plan's,
    stages/run/fit_check.py, else DEFAULT_MINUTES)."""
    specs = params.get("specs") or {}
    minutes = minutes or {}
    total = sum(len(q) for q in quads)
    out = []
    for name in names:
        if name not in specs:
            raise CampaignError(f"unknown spec {name!r}")
        g = specs[name].get("gpus") or 0
        n = g if isinstance(g, int) else len(g)
        if n > total:
            raise CampaignError(f"spec {name!r} needs {n} GPUs; the node has {total}")
        out.append(Job(name, n, float(specs[name].get("est_minutes", minutes.get(name, DEFAULT_MINUTES)))))
    return out


def claim(job: Job, free: set[int], quads=QUADS) -> tuple[int, ...] | None:
    """The quads (by index) `job` would take from the `free` ones now, or None if it must wait."""
    if job.gpus_needed > len(quads[0]):
        every = tuple(range(len(quads)))
        return every if free >= set(every) else None
    for i in range(len(quads)):
        if i in free:
            return (i,)
    return None


def gpus_of(taken: tuple[int, ...], quads=QUADS) -> tuple[int, ...]:
    return tuple(g for i in taken for g in quads[i])


def plan(jobs: list[Job], quads=QUADS) -> list[Slot]:
    """The timeline the policy gives with estimated durations (minutes from the start)."""
    free = set(range(len(quads)))
    running: list[tuple[float, int, Slot, tuple[int, ...]]] = []
    slots: list[Slot] = []
    now, queue, seq = 0.0, list(jobs), 0
    while queue or running:
        while queue:
            taken = claim(queue[0], free, quads)
            if taken is None:
                break
            job = queue.pop(0)
            free -= set(taken)
            slot = Slot(job.spec, gpus_of(taken, quads), now, now + job.minutes, taken[0])
            slots.append(slot)
            heapq.heappush(running, (slot.end_min, seq, slot, taken))
            seq += 1
        if not running:
            break
        now, _, _, taken = heapq.heappop(running)
        free |= set(taken)
    return slots


def gpu_label(gpus: tuple[int, ...]) -> str:
    return f"{gpus[0]}-{gpus[-1]}" if gpus else "none"


def timeline(slots: list[Slot], width: int = 48, base_port: int | None = None) -> str:
    """A text Gantt chart: one row per spec, one column per time step (and its port, if given)."""
    end = max((s.end_min for s in slots), default=0.0) or 1.0
    name_w = max((len(s.spec) for s in slots), default=4)
    port = "  port " if base_port is not None else ""
    lines = [f"{'spec'.ljust(name_w)}  {'gpus'.ljust(7)}  {'start':>6}  {'end':>6}{port}  timeline (min)"]
    for s in slots:
        a, b = round(s.start_min / end * width), max(round(s.end_min / end * width), round(s.start_min / end * width) + 1)
        bar = " " * a + "#" * (b - a)
        port = f"  {base_port + s.index:5d}" if base_port is not None else ""
        lines.append(f"{s.spec.ljust(name_w)}  {gpu_label(s.gpus).ljust(7)}  {s.start_min:6.0f}  "
                     f"{s.end_min:6.0f}{port}  |{bar.ljust(width)}|")
    return "\n".join(lines)


def run_command(spec: str, gpus: tuple[int, ...], port: int) -> list[str]:
    """The arguments of `campaign` that run one spec on a slot (`--gpus 0-3`, or a list)."""
    contiguous = bool(gpus) and list(gpus) == list(range(gpus[0], gpus[-1] + 1))
    gpu_arg = gpu_label(gpus) if contiguous else ",".join(map(str, gpus))
    return ["run", spec] + (["--gpus", gpu_arg] if gpus else []) + ["--port", str(port)]


def fingerprint(params: dict, spec_name: str, executor: str | None = None) -> str:
    """What decides what a spec's run measures, hashed: the spec, its workloads, its gate settings
    (the campaign's, its profile's and its own, resolved), the image, its profile's engine
    settings and the run protocol's version."""
    spec = (params.get("specs") or {})[spec_name]
    prof = get_profile(params, spec.get("profile"))
    group = profile_workloads(params, spec.get("profile"))
    parts = {
        "spec": {k: v for k, v in spec.items() if k not in UNMEASURED_SPEC_KEYS},
        "workloads": {w: group.get(w) for w in spec.get("workloads") or []},
        "gate": gate_settings(params, spec_name),
        "image": spec.get("image") or prof.get("image"),
        "profile": {**{k: prof.get(k) for k in MEASURED_PROFILE_KEYS},
                    # the profiler's window stalls a profiled point; unset, the fingerprint
                    # stays what it was before the setting existed
                    **({"profiler": prof["profiler"]} if prof.get("profiler") else {}),
                    **({"executor": executor} if executor else {})},
        "protocol": params.get("protocol"),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def read_ledger(path: Path) -> dict[str, dict]:
    """The schedule ledger's entries by spec (none when it does not exist yet)."""
    try:
        return json.loads(path.read_text()).get("specs") or {}
    except FileNotFoundError:
        return {}
    except (ValueError, AttributeError):
        raise CampaignError(f"{path}: not a schedule ledger; remove it to run every spec again") from None


def write_ledger(path: Path, entries: dict[str, dict]) -> None:
    """Write the ledger (sorted, no times: an unchanged ledger leaves ingest up to date)."""
    write_atomic(path, json.dumps({"specs": entries}, indent=2, sort_keys=True) + "\n")


def finished(entry: dict | None, fp: str) -> bool:
    """Whether a ledger entry records a run of this fingerprint that ended (not interrupted)."""
    return bool(entry) and entry.get("fingerprint") == fp and bool(entry.get("run_status"))


def execute(jobs: list[Job], *, root: Path, quads=QUADS, base_port: int = 8000,
            progress=lambda s: None, poll_s: float = 2.0,
            done=lambda spec, rc: None) -> dict[str, int]:
    """Run the jobs under the same policy, each slot on its own port; returns each spec's exit
    status. `done(spec, rc)` is called as each run ends (one at a time)."""
    free = set(range(len(quads)))
    queue = list(jobs)
    results: dict[str, int] = {}
    lock = threading.Lock()
    threads: list[threading.Thread] = []

    def worker(job: Job, taken: tuple[int, ...]) -> None:
        gpus, port = gpus_of(taken, quads), base_port + taken[0]
        cmd = [sys.executable, "-m", "stages.cli", *run_command(job.spec, gpus, port)]
        rc = subprocess.run(cmd, cwd=root).returncode
        with lock:
            results[job.spec] = rc
            free.update(taken)
            done(job.spec, rc)
        progress(f"schedule: {job.spec} finished on GPUs {gpu_label(gpus)}, port {port} (exit {rc})")

    while queue or any(t.is_alive() for t in threads):
        with lock:
            while queue:
                taken = claim(queue[0], free, quads)
                if taken is None:
                    break
                job = queue.pop(0)
                free.difference_update(taken)
                progress(f"schedule: {job.spec} starts on GPUs {gpu_label(gpus_of(taken, quads))}, "
                         f"port {base_port + taken[0]}")
                t = threading.Thread(target=worker, args=(job, taken))
                t.start()
                threads.append(t)
        time.sleep(poll_s)
    for t in threads:
        t.join()
    return results


def spec_ledger(ledger_dir: Path, spec: str) -> Path:
    """The file `campaign run <spec>` writes when the spec's run ends."""
    if spec == Path(LEDGER_FILE).stem:
        raise CampaignError(f"spec {spec!r}: the name is taken by the schedule's ledger")
    return ledger_dir / f"{spec}.json"


def exit_log(ledger_dir: Path, spec: str) -> Path:
    """What `campaign run <spec>` printed to standard error after its last line: the warnings its
    libraries print as the process ends (stages/core/files.divert_stderr)."""
    return ledger_dir / f"{spec}.exit.log"


def run_specs(params: dict, names: list[str], *, root: Path, ledger_dir: Path,
              progress=lambda s: None, poll_s: float = 2.0, executor: str | None = None,
              runs: Path | None = None) -> list[str]:
    """The run stage: launch every named spec whose ledger entry lacks a finished run of its
    fingerprint, on the active profile's node (or as Slurm jobs: `executor` slurm, or the
    profile's); keep the ledger. Returns the specs that failed."""
    prof = get_profile(params)
    executor = executor or prof.get("executor")
    quads = node_quads(prof.get("gpus_per_node"))
    path = ledger_dir / LEDGER_FILE
    entries = read_ledger(path)
    prints = {name: fingerprint(params, name, executor=executor) for name in names}
    for name in names:
        spec_ledger(ledger_dir, name)
        if finished(entries.get(name), prints[name]):
            progress(f"schedule: {name} already ran with these settings "
                     f"(run {entries[name].get('run_id')}): not launched")
    todo = [n for n in names if not finished(entries.get(n), prints[n])]
    jobs_from(params, todo, quads)                      # unknown specs first, as before
    paths = Paths.from_params(params, root)
    fit_check.refuse_unfit(params, todo, paths.models, progress)
    jobs = jobs_from(params, todo, quads, fit_check.minutes(params, todo, paths.models, paths.plan))
    if executor == "slurm":
        return _run_on_slurm(params, todo, prof, root=root, ledger_dir=ledger_dir, runs=runs,
                             entries=entries, prints=prints, path=path, progress=progress)

    def done(spec: str, rc: int) -> None:
        try:
            run = json.loads(spec_ledger(ledger_dir, spec).read_text()) if rc == 0 else None
        except (OSError, ValueError):
            run = None
        if run:
            entries[spec] = {"fingerprint": prints[spec], "run_id": run.get("run_id"),
                             "run_status": run.get("run_status")}
        else:                                   # interrupted or refused: tried again next time
            entries.pop(spec, None)
        write_ledger(path, entries)

    results = execute(jobs, root=root, quads=quads, base_port=int(get_profile(params)["port"]),
                      progress=progress, poll_s=poll_s, done=done)
    write_ledger(path, entries)
    return [spec for spec, rc in results.items() if rc != 0]


def _run_on_slurm(params: dict, names: list[str], prof: dict, *, root: Path, ledger_dir: Path,
                  runs: Path | None, entries: dict, prints: dict, path: Path, progress) -> list[str]:
    """The specs as Slurm jobs, the ledger kept as each one ends."""
    from stages.run import slurm
    from stages.run.stage import planned_run_ids     # stage imports this module

    if runs is None:
        raise CampaignError("the slurm executor needs the runs folder")

    def done(spec: str, run_id: str, run_status: str | None) -> None:
        if run_status and run_status != "interrupted":
            entries[spec] = {"fingerprint": prints[spec], "run_id": run_id, "run_status": run_status}
        else:                                   # interrupted or never began: tried again next time
            entries.pop(spec, None)
        write_ledger(path, entries)

    results = slurm.execute(names, params=params, profile=prof, root=root, runs=runs,
                            ledger_dir=ledger_dir, run_ids=planned_run_ids(params, names, runs),
                            progress=progress, done=done)
    write_ledger(path, entries)
    return [spec for spec, rc in results.items() if rc != 0]


def dry_run(params: dict, names: list[str], *, executor: str | None = None, root: Path | None = None,
            ledger_dir: Path | None = None, runs: Path | None = None) -> str:
    """The timeline and the `campaign run` commands of the named specs, on the node of their
    profile (the active one when none is named); for the slurm executor, the sbatch commands."""
    specs = params.get("specs") or {}
    profiles = {(specs.get(n) or {}).get("profile") for n in names} or {params.get("profile")}
    if len(profiles) > 1:
        raise CampaignError(f"specs of several profiles ({', '.join(sorted(map(str, profiles)))}) "
                            "cannot share a node")
    prof = get_profile(params, profiles.pop())
    if (executor or prof.get("executor")) == "slurm":
        from stages.run import slurm
        from stages.run.stage import planned_run_ids     # stage imports this module

        jobs_from(params, names)                         # unknown specs, as below
        return slurm.dry_run(params, names, prof, root=root, ledger_dir=ledger_dir,
                             run_ids=planned_run_ids(params, names, runs, check_profile=False))
    quads, base = node_quads(prof.get("gpus_per_node")), int(prof["port"])
    jobs_from(params, names, quads)                     # unknown specs first
    paths = Paths.from_params(params, root or ".")
    slots = plan(jobs_from(params, names, quads, fit_check.minutes(params, names, paths.models, paths.plan)),
                 quads)
    lines = [timeline(slots, base_port=base)]
    for name, (verdict, why) in fit_check.verdicts(params, names, paths.models).items():
        lines.append(f"plan: {name}: {verdict}: {why}")
    for s in slots:
        lines.append(f"at {s.start_min:5.0f} min: campaign "
                     f"{shlex.join(run_command(s.spec, s.gpus, base + s.index))}")
    return "\n".join(lines)

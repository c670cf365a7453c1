"""Crash and disk faults: the crash-consistency part of `make reliability`.

For each stage that writes (ingest, derive, render, `campaign import`, `campaign seal`, and the
run stage's folder writes, on a stand-in engine), a scratch project is made in the state before
the command (crash_cases.py) and the command is run once uninterrupted: the state after. Then,
each time on a fresh copy of the state before:

- kill instants: the command's process group is killed (SIGKILL) at an instant spread over its
  run, by time (a fraction of the uninterrupted run's seconds) and by write count (at the N-th
  write, pwrite or fsync call, through libfiu's preload: crash_child.py);
- disk faults: one write, pwrite, fsync or open call, chosen at random among those the command
  makes, fails with ENOSPC or EIO (libfiu, Debian's fiu-utils);
- input faults: the runs folder vanishes at a random call, or an open or rename finds the storage
  read-only (EROFS);
- a sweep (ingest): the storage turns read-only (EROFS) or full (ENOSPC) at every `stride`-th open
  and every `stride`-th write of the uninterrupted run, from an offset that each whole run of
  `make reliability` moves on by one (reliability.py), so that `stride` runs fault every open and
  every write with both errors. A fault's effect depends on where it lands (a case found so: the
  storage turning read-only at the manifest of a folder already stored was read as a manifest
  removed), and where that is moves with the machine (DuckDB reads the cgroup files of its host at
  each connect), so fixed counts are not enough.

After each, every output is checked: the warehouse and campaign database open and hold the
tables of the state before or after (the warehouse run by run: it is written in whole-folder
transactions), the site, docs and derived files are the old or the new ones whole, no file of a
run folder changed (a folder sealed by the command has a manifest that lists it whole), and no
lock is left held. A disk or input fault must stop the command with one line naming the path and
the error. Then the command runs again, and its outputs must be those of the uninterrupted run;
its time is the stage's recovery.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from stages.tools.faults.crash_cases import SCENARIOS, Scenario
from stages.tools.faults.hostile_folders import make_project
from stages.tools.faults.crash_process import (  # noqa: F401 (the fault sets, kept importable here)
    DISK, HANG_FACTOR, RENAMES, STRERROR, WRITES, copy_state, fiu_available, finish, launch,
    locks_held, remove, run_clean, runs_changed, runs_digest)

@dataclass
class Case:
    stage: str
    kind: str                 # kill-time, kill-write, disk, input
    plan: str
    fired: str | None = None
    stopped: str = ""         # the command's error line (a fault) or "killed"
    not_whole: list[str] = field(default_factory=list)
    runs_changed: list[str] = field(default_factory=list)
    locks_held: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    bad_stop: str = ""        # why the way it stopped is wrong (several lines, a traceback, no path)
    outputs: int = 0          # outputs checked: each output, each run folder, the locks
    rerun_differs: bool = False
    recovery_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.not_whole or self.runs_changed or self.locks_held or self.leftovers
                    or self.bad_stop or self.rerun_differs)


@dataclass
class StageResult:
    stage: str
    seconds: float            # the uninterrupted run
    calls: dict[str, int]
    cases: list[Case] = field(default_factory=list)


ERROR_LINE = re.compile(r"^campaign: error: ")


def judge_stop(rc: int, err: str, errno_name: str) -> tuple[str, str]:
    """The command's error line, and why its way of stopping is wrong ('' when right): one
    `campaign: error:` line naming a path and the error, exit status not 0, no traceback."""
    lines = [l for l in err.splitlines() if ERROR_LINE.match(l)]
    line = lines[0] if lines else (err.strip().splitlines() or ["(nothing on stderr)"])[-1]
    if rc == 0:
        return line, "exit status 0 after a failed call"
    if "Traceback" in err:
        return line, "a traceback"
    if len(lines) != 1:
        return line, f"{len(lines)} error lines"
    if STRERROR[errno_name] not in line:
        return line, f"the error ({STRERROR[errno_name]}) not named"
    if not re.search(r"[\w.-]+/[\w.-]+|[\w-]+\.\w+", line):
        return line, "no path named"
    return line, ""


# ---------------------------------------------------------------- one case

def one_case(s: Scenario, case: Case, base: Path, scratch: Path, before: dict, after: dict,
             runs_before: dict, seconds: float, *, kill_at_s: float | None = None,
             points: list[str] = (), errno_name: str | None = None, rerun: bool = True,
             kill_plan: str | None = None) -> Case:
    root = copy_state(base, scratch)
    record = scratch / "record.json"
    vanish = root / "data" / "runs" if case.kind == "input" and case.plan.startswith("vanish") else None
    plan = None if kill_at_s is not None else kill_plan or case.plan
    proc = launch(s, root, plan, points, record, vanish)
    if kill_at_s is not None:
        try:
            proc.wait(timeout=kill_at_s)
            case.fired = None                      # ended before the instant
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            case.fired = f"{kill_at_s:.2f} s"
        rc, err = finish(proc, 60)
    else:
        rc, err = finish(proc, max(60.0, seconds * HANG_FACTOR))
        if record.is_file():
            case.fired = json.loads(record.read_text()).get("fired")
    if vanish is not None and vanish.with_name("runs.gone").exists():
        if vanish.exists():
            remove(vanish)
        vanish.with_name("runs.gone").rename(vanish)       # the storage comes back
    if rc == 124:
        case.bad_stop = "hung"
    if case.kind.startswith("kill"):
        case.stopped = "killed" if rc in (-9, 137) or case.fired else f"ended (exit {rc})"
    elif case.fired:
        case.stopped, case.bad_stop = judge_stop(rc, err, errno_name or "EIO")
        if rc == 0 and case.bad_stop == "exit status 0 after a failed call":
            case.bad_stop = ""          # a failed call the command recovered from: judged below
    now = s.state(root)
    for name, state in now.items():
        if not s.judge(name, state, before.get(name), after.get(name)):
            case.not_whole.append(name)
    case.outputs = len(now) + len(runs_before) + 1
    case.runs_changed = runs_changed(root, runs_before)
    case.locks_held = locks_held(root)
    if rerun and not (s.once and now == after):     # an import that ended is not made twice
        rc2, err2, case.recovery_s = run_clean(s, root)
        again = s.state(root)
        case.rerun_differs = rc2 != 0 or not s.same(again, after)
        if case.rerun_differs and rc2 != 0:
            case.bad_stop = case.bad_stop or f"re-run failed: {err2.strip().splitlines()[-1:]}"
        case.leftovers = s.leftovers(root)
        case.runs_changed += [r for r in runs_changed(root, runs_before) if r not in case.runs_changed]
    remove(scratch)
    return case


# ---------------------------------------------------------------- a stage

def reference(s: Scenario, root: Path, record: Path, armed: bool) -> tuple[float, dict[str, int]]:
    """The uninterrupted run, on `root`: its seconds and, armed, the calls of each kind it makes
    (counted by libfiu in that same run, which no call fails)."""
    points = sorted({*WRITES, *RENAMES, *(p for ps in DISK.values() for p in ps)}) if armed else []
    t0 = time.perf_counter()
    rc, err = finish(launch(s, root, "count" if armed else None, points, record), 900)
    seconds = time.perf_counter() - t0
    if rc != 0:
        raise RuntimeError(f"campaign {s.name} failed on its scratch project: {err.strip()[-600:]}")
    if not armed:
        return seconds, {}
    seen = json.loads(record.read_text())["by_point"] if record.is_file() else {}
    return seconds, {k: sum(seen.get(p, 0) for p in ps)
                     for k, ps in (("writes", WRITES), ("renames", RENAMES), *DISK.items())}


def stage(s: Scenario, workdir: Path, *, kills_time: int, kills_write: int, disk: int, inputs: int,
          rng: random.Random, first: int = 0, renames: int = 0, stride: int = 0, offset: int = 0,
          progress: Callable[[str], None] = lambda _: None) -> StageResult:
    """`first`: where the stage starts in the turn of disk faults (write, fsync, open; ENOSPC,
    then EIO) and input faults (vanish, read-only); `renames`: kills at renames, which put outputs
    in place, spread over those the command makes; `stride`: the sweep (0: none), EROFS and ENOSPC
    at opens and writes number offset+1, offset+1+stride, ... (sweep_counts)."""
    base = workdir / s.name / "base"
    s.prepare(make_project(base))
    proj = base / "project"
    before, runs_before = s.state(proj), runs_digest(proj)
    armed = fiu_available() and s.fiu
    ref = copy_state(base, workdir / s.name / "ref")
    seconds, calls = reference(s, ref, workdir / s.name / "ref" / "record.json", armed)
    after = s.state(ref)
    remove(workdir / s.name / "ref")
    scratch = workdir / s.name / "case"
    result = StageResult(s.name, seconds, calls)
    args = (base, scratch, before, after, runs_before, seconds)

    for i in range(kills_time):
        at = seconds * (i + rng.random()) / kills_time
        result.cases.append(one_case(s, Case(s.name, "kill-time", f"SIGKILL at {at:.2f} s"), *args,
                                     kill_at_s=at))
    if armed:
        for i in range(kills_write):
            n = max(1, int(calls["writes"] * (i + rng.random()) / kills_write))
            result.cases.append(one_case(s, Case(s.name, "kill-write", f"kill@{n}"), *args,
                                         points=WRITES))
        for k in sorted({-(-(i + 1) * calls["renames"] // renames) for i in range(renames)}
                        if calls["renames"] else ()):       # spread up to the last rename
            result.cases.append(one_case(s, Case(s.name, "kill-write", f"kill at rename #{k}"), *args,
                                         points=RENAMES, kill_plan=f"kill@{k}"))
        for i in range(first, first + disk):
            call = ("write", "fsync", "open")[i % 3]
            if not calls[call]:         # one it never makes (derive: no fsync): a write or an open
                call = "write" if i % 2 and calls["write"] else "open"
            errno_name = ("ENOSPC", "EIO")[(i // 3) % 2]
            n = rng.randint(1, max(1, calls[call]))
            result.cases.append(one_case(s, Case(s.name, "disk", f"{errno_name}@{n}", ), *args,
                                         points=DISK[call], errno_name=errno_name))
            result.cases[-1].plan = f"{call} #{n} fails with {errno_name}"
        for i in range(first, first + inputs):
            n, what = rng.randint(1, max(1, calls["open"])), ("vanish", "EROFS")[i % 2]
            c = one_case(s, Case(s.name, "input", f"{what}@{n}"), *args, points=DISK["open"],
                         errno_name="ENOENT" if what == "vanish" else "EROFS")
            c.plan = (f"the runs folder vanishes at open #{n}" if what == "vanish"
                      else f"open #{n} finds the storage read-only (EROFS)")
            result.cases.append(c)
        for call, n in sweep_counts(calls, stride, offset):
            for errno_name in SWEEP_ERRNOS:
                c = one_case(s, Case(s.name, "sweep", f"{errno_name}@{n}"), *args, points=DISK[call],
                             errno_name=errno_name)
                c.plan = f"sweep: {call} #{n} fails with {errno_name}"
                result.cases.append(c)
    for c in (c for c in result.cases if not c.ok):
        progress(f"crash: {s.name}: {c.kind} `{c.plan}` did not hold: not whole {c.not_whole}, runs "
                 f"changed {c.runs_changed[:3]}, locks {c.locks_held}, left {c.leftovers}, stop "
                 f"{c.bad_stop!r} ({c.stopped[:160]}), re-run differs {c.rerun_differs}")
    progress(f"crash: {s.name}: {len(result.cases)} cases in {seconds:.1f} s runs, "
             f"{sum(not c.ok for c in result.cases)} did not hold")
    return result


SWEEP_CALLS = ("open", "write")
SWEEP_ERRNOS = ("EROFS", "ENOSPC")


def sweep_counts(calls: dict[str, int], stride: int, offset: int) -> list[tuple[str, int]]:
    """The calls a sweep faults: of each kind of SWEEP_CALLS, numbers offset+1, offset+1+stride, ...
    up to the count of the uninterrupted run (offset taken modulo stride: over `stride` offsets
    every call is faulted once)."""
    if stride <= 0:
        return []
    return [(call, n) for call in SWEEP_CALLS for n in range(1 + offset % stride, calls[call] + 1, stride)]


# the long form (`make reliability`) and the short form (tests/test_crash.py): per stage, kills
# by time, kills by write count, disk faults, input faults, where its turn of faults starts
# (import's kills by time mostly land after its sub-second run has ended; seal's and ingest's
# fire), kills at renames, and the stride of its sweep of EROFS and ENOSPC over opens and writes
# (ingest's: one sweep case costs about 4 s on a 2-core machine, a run makes about 500 opens and
# 50 writes, so every call with both errors is some 1,100 cases, over an hour; a stride of 16
# is about 70 cases, and 16 runs cover every call)
SWEEP_STRIDE = 16
LONG = {"import": (40, 40, 40, 2, 0, 3), "seal": (40, 40, 34, 2, 1, 2),
        "ingest": (30, 30, 15, 4, 0, 2, SWEEP_STRIDE), "derive": (10, 10, 12, 2, 1, 3),
        "render": (3, 3, 6, 1, 2, 4), "run": (8, 0, 0, 0)}
SHORT = {"ingest": (1, 1, 1, 1, 0),    # a write fails with ENOSPC; the runs folder vanishes
         "seal": (1, 1, 1, 1, 1),      # an fsync fails with ENOSPC; the storage turns read-only
         "derive": (1, 1, 1, 0, 5)}    # an open fails with EIO


def run(workdir: Path | None = None, *, plan: dict[str, tuple[int, ...]] = LONG, seed: int = 35,
        workers: int = 1, sweep_offset: int = 0,
        progress: Callable[[str], None] = lambda _: None) -> list[StageResult]:
    """Every stage of `plan`, `workers` stages at a time (each in its own scratch folder, with its
    own random draws, so the cases do not depend on the order); results in the plan's order.
    `sweep_offset`: where the sweeps start (sweep_counts)."""
    with tempfile.TemporaryDirectory(prefix="campaign-crash-") as tmp:
        work = Path(workdir or tmp)

        def one(name: str) -> StageResult:
            kt, kw, disk, inputs, *more = plan[name]
            first, renames, stride = (*more, 0, 0, 0)[:3]
            progress(f"crash: {name}: {kt + kw + renames} kill instants, {disk} disk faults, "
                     f"{inputs} input faults" + (f", a sweep of EROFS and ENOSPC over every "
                                                 f"{stride}th open and write from #{1 + sweep_offset % stride}"
                                                 if stride else ""))
            result = stage(SCENARIOS[name], work, kills_time=kt, kills_write=kw, disk=disk,
                           inputs=inputs, rng=random.Random(f"{seed}-{name}"), first=first,
                           renames=renames, stride=stride, offset=sweep_offset, progress=progress)
            remove(work / name)
            return result
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(one, plan))


def summary(results: list[StageResult]) -> dict[str, Any]:
    cases = [c for r in results for c in r.cases]
    kills = [c for c in cases if c.kind.startswith("kill") and c.fired]
    faults = [c for c in cases if c.kind == "disk" and c.fired]
    return {
        "cases": len(cases), "kill_instants": len(kills), "disk_faults": len(faults),
        "input_faults": sum(1 for c in cases if c.kind == "input" and c.fired),
        "sweep_faults": sum(1 for c in cases if c.kind == "sweep" and c.fired),
        "outputs_checked": sum(c.outputs for c in cases),
        "not_whole": sum(len(c.not_whole) for c in cases),
        "runs_changed": sum(len(c.runs_changed) for c in cases),
        "locks_held": sum(len(c.locks_held) for c in cases),
        "leftovers": sum(len(c.leftovers) for c in cases),
        "bad_stops": sum(bool(c.bad_stop) for c in cases),
        "reruns": sum(1 for c in cases if c.recovery_s),
        "reruns_differing": sum(c.rerun_differs for c in cases),
        "slowest_recovery_s": {r.stage: round(max((c.recovery_s for c in r.cases), default=0), 1)
                               for r in results},
    }

"""Run specs over GPU sets: quad-sized specs two at a time, whole-node specs on the whole node.

The node has two quads (GPUs 0-3 and 4-7, NVLink inside each). A spec needing at most four GPUs
takes a free quad; one needing more waits until the whole node is free. Specs start in the order
given (first come, first served: a waiting whole-node spec is not overtaken, so it cannot starve).
An engine launch is the expensive part, so each spec is one launch serving its gate and all of its
workloads. `plan` computes the timeline from each spec's estimate (`est_minutes`) for --dry-run;
`execute` runs the same policy for real, one `campaign run <spec> --gpus ...` process per spec.
"""
from __future__ import annotations

import heapq
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from stages.core.config import CampaignError

QUADS: tuple[tuple[int, ...], ...] = ((0, 1, 2, 3), (4, 5, 6, 7))
DEFAULT_MINUTES = 30.0


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


def jobs_from(params: dict, names: list[str]) -> list[Job]:
    specs = params.get("specs") or {}
    out = []
    for name in names:
        if name not in specs:
            raise CampaignError(f"unknown spec {name!r}")
        g = specs[name].get("gpus") or 0
        n = g if isinstance(g, int) else len(g)
        if n > sum(len(q) for q in QUADS):
            raise CampaignError(f"spec {name!r} needs {n} GPUs; the node has 8")
        out.append(Job(name, n, float(specs[name].get("est_minutes", DEFAULT_MINUTES))))
    return out


def claim(job: Job, free: set[int]) -> tuple[int, ...] | None:
    """The GPU set `job` would take from `free` now, or None if it must wait."""
    if job.gpus_needed > len(QUADS[0]):
        every = tuple(sorted(g for q in QUADS for g in q))
        return every if free >= set(every) else None
    for quad in QUADS:
        if free >= set(quad):
            return quad
    return None


def plan(jobs: list[Job]) -> list[Slot]:
    """The timeline the policy gives with estimated durations (minutes from the start)."""
    free = {g for q in QUADS for g in q}
    running: list[tuple[float, int, Slot]] = []
    slots: list[Slot] = []
    now, queue, seq = 0.0, list(jobs), 0
    while queue or running:
        while queue:
            gpus = claim(queue[0], free)
            if gpus is None:
                break
            job = queue.pop(0)
            free -= set(gpus)
            slot = Slot(job.spec, gpus, now, now + job.minutes)
            slots.append(slot)
            heapq.heappush(running, (slot.end_min, seq, slot))
            seq += 1
        if not running:
            break
        now, _, done = heapq.heappop(running)
        free |= set(done.gpus)
    return slots


def timeline(slots: list[Slot], width: int = 48) -> str:
    """A text Gantt chart: one row per spec, one column per time step."""
    end = max((s.end_min for s in slots), default=0.0) or 1.0
    name_w = max((len(s.spec) for s in slots), default=4)
    lines = [f"{'spec'.ljust(name_w)}  {'gpus'.ljust(7)}  {'start':>6}  {'end':>6}  timeline (min)"]
    for s in slots:
        a, b = round(s.start_min / end * width), max(round(s.end_min / end * width), round(s.start_min / end * width) + 1)
        bar = " " * a + "#" * (b - a)
        gpus = f"{s.gpus[0]}-{s.gpus[-1]}"
        lines.append(f"{s.spec.ljust(name_w)}  {gpus.ljust(7)}  {s.start_min:6.0f}  {s.end_min:6.0f}  |{bar.ljust(width)}|")
    return "\n".join(lines)


def execute(jobs: list[Job], *, root: Path, progress=lambda s: None, poll_s: float = 2.0) -> dict[str, int]:
    """Run the jobs under the same policy; returns each spec's exit status."""
    free = {g for q in QUADS for g in q}
    queue = list(jobs)
    results: dict[str, int] = {}
    lock = threading.Lock()
    threads: list[threading.Thread] = []

    def worker(job: Job, gpus: tuple[int, ...]) -> None:
        cmd = [sys.executable, "-m", "stages.cli", "run", job.spec, "--gpus", ",".join(map(str, gpus))]
        rc = subprocess.run(cmd, cwd=root).returncode
        with lock:
            results[job.spec] = rc
            free.update(gpus)
        progress(f"schedule: {job.spec} finished on GPUs {gpus[0]}-{gpus[-1]} (exit {rc})")

    while queue or any(t.is_alive() for t in threads):
        with lock:
            while queue:
                gpus = claim(queue[0], free)
                if gpus is None:
                    break
                job = queue.pop(0)
                free.difference_update(gpus)
                progress(f"schedule: {job.spec} starts on GPUs {gpus[0]}-{gpus[-1]}")
                t = threading.Thread(target=worker, args=(job, gpus))
                t.start()
                threads.append(t)
        time.sleep(poll_s)
    for t in threads:
        t.join()
    return results

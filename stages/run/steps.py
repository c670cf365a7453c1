"""A run's benchmark steps (stages/run/stage.py runs them on a ready engine): every sweep point
(`vllm bench serve`, inside the engine's profiler where its workload asks) and every multi-turn
workload, in params order, the prefix cache emptied before each, the samplers around each, a
failed step recorded and the run going on, a storage fault stopping it.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import httpx

from stages.core.faults import is_storage_fault, storage_fault
from stages.core.multiturn_shapes import Workload
from stages.run import bench_client as bench
from stages.run import multiturn
from stages.run import profiler
from stages.run.engine import Engine


@dataclass(frozen=True)
class Step:
    """One benchmark step of a run: a sweep point or a multi-turn workload."""
    name: str                        # point id or workload name, as launch.out names it
    about: str                       # the progress line
    # runs it, telling `window(sent, ended)` (if given) when its requests went out and the last
    # answer came back; returns a problem to record (the step still ran)
    go: Callable[[Callable[[float, float], None] | None], str | None]


def steps_of(sweeps: dict, conversations: list[Workload], *, base_url: str, model: str,
           tokenizer_file: Path, folder: Path, run_id: str, client: httpx.Client, engine: str,
           alive: Callable[[], bool], say: Callable[[str], None],
           profiled: profiler.Settings | None = None,
           note: Callable[[str, str], None] = lambda k, v: None, prompts=None) -> list[Step]:
    """Every sweep point (`vllm bench serve`), then every multi-turn workload, in params order.
    A point its workload asks to profile runs inside the engine's profiler (`profiled`: the
    profile's settings, None where no workload asks); `note(key, value)` records what it kept;
    `prompts`, a PromptBank that built the points' requests ahead (sweep_points, point_argv)."""
    def point(p: bench.Point) -> Step:
        profile = profiled is not None and profiler.profiles(sweeps[p.workload], p.concurrency)

        def go(window) -> None:
            with (profiler.profiling(client, base_url, engine, folder, p.point_id, profiled, note)
                  if profile else contextlib.nullcontext()):
                bench.run_point(p, base_url=base_url, model=model, tokenizer=model,
                                bench_dir=folder / "bench", run_id=run_id, client=client,
                                engine=engine, window=window, prompts=prompts)
        return Step(p.point_id, f"bench {p.point_id}: {p.num_prompts} prompts of {p.prompt_tokens} "
                                f"tokens at concurrency {p.concurrency}"
                                + (", profiled" if profile else ""), go)

    def conversation(w: Workload) -> Step:
        def go(window) -> str | None:
            log = multiturn.run_workload(w, base_url=base_url, model=model, tokenizer_file=tokenizer_file,
                                         folder=folder, alive=alive, progress=say, window=window)
            return f"{log.failed} of {log.requests} requests failed" if log.failed else None
        return Step(w.name, f"{w.kind} {w.name}: {w.sessions} session(s), {w.turns} turns", go)

    return [point(p) for p in sweep_points(sweeps)] + [conversation(w) for w in conversations]


def sweep_points(sweeps: dict) -> list[bench.Point]:
    """A run's sweep points, in the order it runs them."""
    return bench.points_for(workloads=sweeps, names=list(sweeps))


def point_argv(p: bench.Point, *, base_url: str, model: str, folder: Path, run_id: str,
               engine: str) -> list[str]:
    """The `vllm bench serve` arguments a run's point runs with (its prompts are built from them)."""
    return bench.bench_argv(p, base_url=base_url, model=model, tokenizer=model,
                            result_dir=folder / "bench", run_id=run_id, engine=engine)


class Samplers:
    """The samplers around one step, told its requests window together."""

    def __init__(self, samplers: list):
        self.samplers = samplers

    def mark_requests(self, sent: float, ended: float) -> None:
        for s in self.samplers:
            s.mark_requests(sent, ended)


@contextlib.contextmanager
def sampling(*contexts):
    """Every sampler of `contexts` around the body, as one (None when none of them samples)."""
    with contextlib.ExitStack() as stack:
        samplers = [s for s in (stack.enter_context(c) for c in contexts) if s is not None]
        yield Samplers(samplers) if samplers else None


@dataclass
class Tally:
    """What the benchmark steps of a run came to, kept up to date (an interrupt reads it)."""
    done: int = 0
    resets: int = 0
    died: bool = False


def stamp(t: float | None) -> str:
    """Epoch seconds as UTC ISO 8601 to the millisecond (`-` for none), as launch.out's timings
    write them."""
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def step_times(name: str, start: float, end: float, requests: tuple[float, float] | None,
               waited_s: float | None) -> str:
    """launch.out's `step_times` value of one step: when it started and ended on the wall clock,
    its requests window (the first of its requests sent, the last answer ended; `-` where it could
    not be timed), and the seconds it waited for prompts still being built (`-`: none built ahead).
    The client's own time is the step less its requests window."""
    sent, ended = requests if requests else (None, None)
    waited = "-" if waited_s is None else f"{waited_s:.3f}"
    return (f"{name} start={stamp(start)} requests_start={stamp(sent)} requests_end={stamp(ended)} "
            f"end={stamp(end)} prompts_waited_s={waited}")


def benchmark(steps: list[Step], eng: Engine, out: Any, interrupts: Any,
               client: httpx.Client, engine: str, say: Callable[[str], None], tally: Tally,
               sample: Callable[[str], Any] = lambda name: contextlib.nullcontext(),
               prompts=None) -> None:
    """Run the steps on a ready engine, the prefix cache emptied before each. A failed step is
    recorded and the run goes on; once the engine is gone the rest are skipped. `sample(name)`
    wraps each step (the GPU sampler of a run with a GPU set, the /metrics sampler), and is told
    the step's requests window where the step could time its requests. Each step that ran leaves
    a `step_times` line in launch.out (step_times()); `prompts`, the run's PromptBank, says how
    long a point waited for its prompts."""
    for i, step in enumerate(steps, 1):
        interrupts.check()
        if not eng.alive():
            tally.died = True
            out.add(point_skipped=f"{step.name} engine no longer running")
            continue
        say(f"{i}/{len(steps)} {step.about}")
        tally.resets += bench.reset_prefix_cache(client, eng.base_url, engine)
        start, window = time.time(), []
        try:
            with sample(step.name) as sampler:
                def told(sent: float, ended: float) -> None:
                    window.append((sent, ended))
                    if sampler is not None:
                        sampler.mark_requests(sent, ended)
                problem = step.go(told)
            tally.done += 1
        except (httpx.HTTPError, OSError, RuntimeError, ValueError) as exc:
            if is_storage_fault(exc):
                # the run folder cannot be written (disk full, failing): stop here, keeping the
                # points measured; the caller stops the engine and marks the run failed
                where = getattr(exc, "filename", None) or step.name
                fault = storage_fault(where, exc)
                out.add(point_error=f"{step.name} {fault}")
                raise fault from None
            problem = f"{type(exc).__name__}: {exc}"
        # (a storage fault has stopped the run above: launch.out may not take another line)
        waited = getattr(prompts, "waited_s", {}).get(step.name)
        out.add(step_times=step_times(step.name, start, time.time(), window[-1] if window else None, waited))
        interrupts.check()
        if problem:
            out.add(point_error=f"{step.name} {problem}")
            say(f"{step.name} failed: {problem}")
            tally.died = tally.died or not eng.still_up()

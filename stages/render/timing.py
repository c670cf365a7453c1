"""Where a render's time goes: wall seconds per phase, for the bench report and `--timings`.

A phase is timed by `with phases("audit"):`; time spent in a nested phase (a chart drawn while a
page renders) is counted in the inner phase only, so the phases add up to the render's wall time.

Example:
    phases = Phases()
    with phases("pages"):
        with phases("charts"):
            ...
    phases.seconds()   # {"pages": ..., "charts": ...}
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator


class Phases:
    """Wall seconds by phase name, nested phases subtracted from their outer one."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._stack: list[list] = []     # [name, started, seconds taken by inner phases]
        self.started = time.perf_counter()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        frame = [name, time.perf_counter(), 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            self._stack.pop()
            spent = time.perf_counter() - frame[1]
            self._seconds[name] = self._seconds.get(name, 0.0) + spent - frame[2]
            if self._stack:
                self._stack[-1][2] += spent

    def seconds(self) -> dict[str, float]:
        """Each phase's own seconds, and `other`: the wall time since the start in no phase."""
        own = {name: round(s, 3) for name, s in self._seconds.items()}
        own["other"] = round(max(0.0, time.perf_counter() - self.started - sum(self._seconds.values())), 3)
        return own


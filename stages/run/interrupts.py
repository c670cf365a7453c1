"""SIGINT, SIGTERM and SIGHUP as KeyboardInterrupt while a run or the jobs of a schedule are out.

Our own handler (not Python's default one) also keeps asyncio from taking SIGINT over inside the
benchmark, so an interrupt always reaches the run and stops the engine. `received` names the
signal, so that `check` still stops the run where library code swallowed the interrupt.

Example:
    with Interrupts() as interrupts:
        ...
        interrupts.check()
"""
from __future__ import annotations

import signal


class Interrupts:
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

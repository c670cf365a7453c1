"""One `campaign` command with a fault armed inside it: the process the crash tests kill or starve.

Run as `python -m stages.tools.faults.crash_child PLAN -- campaign-args...` with libfiu's POSIX preload
(`fiu_posix_preload.so`, Debian's libfiu0) in LD_PRELOAD. PLAN is `count`, `kill@N` or
`ERRNO@N` (ENOSPC, EIO, ...) or `vanish@N` (the folder CRASH_VANISH
is renamed away at that call) over the calls of the failure points named in CRASH_POINTS
(libfiu's names: posix/io/rw/write, posix/io/sync/fsync, posix/io/oc/open, ...). After the
command's modules are imported, each armed point gets a libfiu external callback that counts its
calls across the process's threads; at the N-th one it either kills the process group (SIGKILL:
the stage and every process it started, as a job killed at its time limit) or makes that one
call fail with the errno. The callback then stands down: one fault per run. What happened is
written to CRASH_RECORD: the calls counted, and the call that was failed.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import sys
import threading

# Writes to the command's own stdout and stderr (pipes to the caller) are no disk writes: they
# are made with the armed points standing down.
_QUIET = threading.local()


class _Console:
    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        _QUIET.on = True
        try:
            n = self._stream.write(text)
            self._stream.flush()
            return n
        finally:
            _QUIET.on = False

    def flush(self):
        _QUIET.on = True
        try:
            self._stream.flush()
        finally:
            _QUIET.on = False

    def __getattr__(self, name):
        return getattr(self._stream, name)


_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int),
                       ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint))


class Fault:
    def __init__(self, plan: str, record: str | None):
        what, _, at = plan.partition("@")
        self.what = what
        self.at = int(at) if at else 0
        self.calls = 0
        self.by_point: dict[str, int] = {}
        self.fired: str | None = None
        self.record = record
        self.guard = threading.Lock()
        self.pid = os.getpid()

    def hit(self, name: bytes, failnum, failinfo, flags) -> int:
        if self.fired is not None or os.getpid() != self.pid or getattr(_QUIET, "on", False):
            return 0
        with self.guard:
            self.calls += 1
            point = name.decode()
            self.by_point[point] = self.by_point.get(point, 0) + 1
            if self.what == "count" or self.calls != self.at:
                return 0
            self.fired = f"{name.decode()}#{self.calls}"
            if os.environ.get("CRASH_STACK"):
                import traceback
                self.fired += " " + " < ".join(
                    f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in traceback.extract_stack()[-8:-1])
        self.save()
        if self.what == "kill":
            os.killpg(0, signal.SIGKILL)
        if self.what == "vanish":       # the storage goes away; this call itself goes through
            gone = os.environ["CRASH_VANISH"]
            os.rename(gone, gone + ".gone")
            return 0
        failinfo[0] = getattr(errno, self.what)
        return 1

    def save(self) -> None:
        if self.record:
            # the record is written through the real libc: the armed points stand down once fired
            with open(self.record, "w") as f:
                json.dump({"calls": self.calls, "by_point": self.by_point, "fired": self.fired}, f)


def arm(plan: str, points: list[str], record: str | None) -> Fault:
    lib = ctypes.CDLL("libfiu.so.0")
    lib.fiu_enable_external.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_uint, _CB]
    fault = Fault(plan, record)
    fault.callback = _CB(fault.hit)     # kept alive as long as the fault
    for point in points:
        if lib.fiu_enable_external(point.encode(), 1, None, 0, fault.callback) != 0:
            raise SystemExit(f"crash_child: cannot arm {point}")
    return fault


def main(argv: list[str]) -> None:
    plan, sep, args = argv[0], argv[1], argv[2:]
    assert sep == "--"
    from stages import cli        # the command's modules, imported before the fault is armed
    import duckdb  # noqa: F401
    import pandas  # noqa: F401
    points = [p for p in os.environ.get("CRASH_POINTS", "").split(",") if p]
    fault = arm(plan, points, os.environ.get("CRASH_RECORD")) if points else None
    os.environ.pop("LD_PRELOAD", None)      # the processes it starts (mkdocs, engines) run plain
    sys.stdout, sys.stderr = _Console(sys.stdout), _Console(sys.stderr)
    sys.argv = ["campaign", *args]
    try:
        cli.main()
    finally:
        if fault is not None and fault.fired is None:
            fault.fired = None
            fault.save()


if __name__ == "__main__":
    main(sys.argv[1:])

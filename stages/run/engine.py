"""Engines as context managers: start in their own process group, wait for readiness, always stop.

An executor (stages/run/executors.py) turns a run spec into the exact command to start, a Launch.
`Engine` runs that command with its output going to the run's `server.log`, polls
`/health` until ready (or the process dies, or time runs out), and on exit stops the whole process
group: SIGTERM, a grace period, then SIGKILL. The engine is also asked to die with us
(PR_SET_PDEATHSIG), so even a hard kill of the campaign does not leave it serving.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

import httpx

from stages.core.config import CampaignError
from stages.core.secrets import scrub, secret_values
from stages.run.executors import Launch

_PR_SET_PDEATHSIG = 1

# Log substrings that tell a waiting user where startup is; the last one seen wins.
_PHASES = (
    ("Resolved architecture", "resolving model"),
    ("Starting to load model", "loading weights"),
    ("Loading weights", "loading weights"),
    ("Model loading took", "weights loaded"),
    ("Initializing model took", "weights loaded"),
    ("Warming up model", "compiling"),
    ("torch.compile", "compiling"),
    ("Capturing CUDA graph", "capturing CUDA graphs"),
    ("Graph capturing finished", "warming up"),       # vLLM's warm-up after capture can take minutes
    ("KV cache size", "KV cache allocated"),
    ("max_total_num_tokens", "KV cache allocated"),
    ("init engine", "engine initialised"),
    ("Starting vLLM", "starting API server"),
    ("Application startup complete", "ready"),
)


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class EngineDied(CampaignError):
    pass


class Engine:
    """A running engine. Use as `with Engine(launch, log_path) as eng: eng.wait_ready(...)`."""

    def __init__(self, launch: Launch, log_path: Path, *, stop_grace_s: float = 20.0):
        self.launch = launch
        self.log_path = log_path
        self.stop_grace_s = stop_grace_s
        self.proc: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.base_url = f"http://127.0.0.1:{launch.port}"

    def __enter__(self) -> "Engine":
        env = {**os.environ, **self.launch.env}
        self._log = open(self.log_path, "ab")
        self._copier = None
        secrets = [v.encode() for v in secret_values(self.launch.argv, self.launch.env)]
        self.started_at = time.monotonic()
        # With secrets about, the engine's output passes through a scrubbing copier on its way
        # to server.log; otherwise it goes straight to the file.
        self.proc = subprocess.Popen(
            self.launch.argv, cwd=self.launch.cwd, env=env,
            stdout=subprocess.PIPE if secrets else self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
        if secrets:
            self._copier = threading.Thread(target=_copy_scrubbed, daemon=True,
                                            args=(self.proc.stdout, self._log, secrets))
            self._copier.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pgid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def still_up(self, *, within_s: float = 10.0) -> bool:
        """After a request failed: whether the engine is still up. A killed engine closes its
        connections a moment before its process can be reaped, so alive() alone can still say yes;
        this waits until the engine either answers /health or has exited, `within_s` at most."""
        deadline = time.monotonic() + within_s
        with httpx.Client(timeout=1.0) as client:
            while self.alive():
                if self._healthy(client):
                    return True
                if time.monotonic() >= deadline:
                    return self.alive()
                time.sleep(0.2)
        return False

    def _healthy(self, client: httpx.Client) -> bool:
        try:
            return client.get(self.base_url + "/health").status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, *, timeout_s: float, progress: Callable[[str], None] | None = None,
                   every_s: float = 5.0) -> float:
        """Poll /health until it answers 200; return seconds since start. Raises EngineDied."""
        assert self.proc is not None and self.started_at is not None
        last_report = 0.0
        with httpx.Client(timeout=2.0) as client:
            while True:
                elapsed = time.monotonic() - self.started_at
                if self.proc.poll() is not None:
                    raise EngineDied(f"engine exited with code {self.proc.returncode} after "
                                     f"{elapsed:.0f} s (see {self.log_path})")
                if self._healthy(client):
                    return elapsed
                if elapsed > timeout_s:
                    raise EngineDied(f"engine not ready after {timeout_s:.0f} s (see {self.log_path})")
                if progress and elapsed - last_report >= every_s:
                    last_report = elapsed
                    progress(f"waiting for engine: {elapsed:4.0f} s, {self.phase()}")
                time.sleep(0.5)

    def phase(self) -> str:
        """The latest startup phase named in the log."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))
                tail = f.read().decode("utf-8", "replace")
        except OSError:
            return "starting"
        best, pos = "starting", -1
        for needle, label in _PHASES:
            i = tail.rfind(needle)
            if i > pos:
                best, pos = label, i
        return best

    def stop(self) -> None:
        """Stop the engine and every process in its group, whatever state it is in.

        Interrupt signals are held back meanwhile, so a second Ctrl-C cannot cut the clean-up short."""
        if self.proc is None:
            return
        held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            self._stop_group()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)

    def _stop_group(self) -> None:
        # The leader first, so the engine shuts its workers down in order; then the whole group.
        pgid = self.proc.pid
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_grace_s / 2)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace_s / 2
        while time.monotonic() < deadline and _group_alive(pgid):
            try:
                self.proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self._copier is not None:
            self._copier.join(timeout=10)
        for cmd in self.launch.cleanup:           # e.g. docker rm -f <run_id>
            try:
                subprocess.run(list(cmd), capture_output=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._log.close()


def _copy_scrubbed(src, dst, secrets: list[bytes]) -> None:
    """Copy the engine's output line by line with every secret value replaced."""
    for line in iter(src.readline, b""):
        dst.write(scrub(line, secrets))
        dst.flush()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may contain spaces, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))

"""One writer at a time per stage output: a lock file per output, naming who holds it.

Each output (the warehouse, campaign.duckdb, the site folder, a spec's ledger file, ...) has a lock
file in the locks folder (`names.LOCK_DIR`, beside the outputs and never inside one), held with
`flock` while a command writes it. The holder writes its pid, command and start time into the
file, so a second writer is refused with one line saying who to wait for. The kernel drops the
lock when the holder exits, however it exits; the files themselves are left in place.

Example:
    with locks.writing(paths.root, [paths.campaign_db, paths.derived], "campaign derive"):
        derive.run(...)
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import re
from pathlib import Path
from typing import Iterable, Iterator

from stages.core.errors import CampaignError
from stages.core.names import LOCK_DIR


def lock_file(root: Path, output: Path) -> Path:
    """The lock file of `output`: its path from the root, made one file name."""
    return Path(root) / LOCK_DIR / (re.sub(r"[^A-Za-z0-9._-]", "_", _shown(root, output)) + ".lock")


def _shown(root: Path, output: Path) -> str:
    return os.path.relpath(Path(output).resolve(), Path(root).resolve())


def _holder(fd: int) -> str:
    """Who holds a lock, from what it wrote into the lock file."""
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        info = json.loads(os.read(fd, 4096) or b"{}")
        since = dt.datetime.fromisoformat(info["since"])
    except (ValueError, KeyError, TypeError):
        return "another command"
    when = since.strftime("%H:%M:%S" if since.date() == dt.date.today() else "%Y-%m-%d %H:%M:%S")
    return f"`{info.get('command', '?')}` (pid {info.get('pid', '?')}, since {when})"


def _take(root: Path, output: Path, command: str) -> int:
    path = lock_file(root, output)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise CampaignError(f"{_shown(root, output)} is being written by {holder}; "
                            "try again when it ends") from None
    info = {"pid": os.getpid(), "command": command, "since": dt.datetime.now().isoformat(timespec="seconds")}
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
    except OSError:
        pass        # a full disk: the lock is held all the same, its holder shown as "another command"
    return fd


@contextlib.contextmanager
def writing(root: Path, outputs: Iterable[Path], command: str) -> Iterator[None]:
    """Hold the write lock of every output while the block runs, or raise a CampaignError naming
    the command that holds one. Locks are taken in one order, so two commands cannot deadlock."""
    held: list[int] = []
    try:
        for output in sorted({Path(o).resolve() for o in outputs}):
            held.append(_take(root, output, command))
        yield
    finally:
        for fd in reversed(held):
            os.close(fd)

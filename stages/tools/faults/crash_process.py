"""Running one command of a crash case and looking at what it left: the libfiu preload that kills or
faults it (crash_child.py), its process group, a scratch copy of the state before, and the checks
that no run folder changed and no lock is left held (crash.py drives them)."""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from stages.formats.sealed import RUN_MANIFEST, manifest_text
from stages.tools.faults import crash_outputs as co
from stages.tools.faults.crash_cases import Scenario
from stages.tools.faults.hostile_folders import make_writable

FIU_DIR = Path("/usr/lib/fiu")
PRELOAD = [FIU_DIR / "fiu_run_preload.so", FIU_DIR / "fiu_posix_preload.so"]
WRITES = ["posix/io/rw/write", "posix/io/rw/pwrite", "posix/io/sync/fsync", "posix/io/sync/fdatasync"]
DISK = {"write": ["posix/io/rw/write", "posix/io/rw/pwrite"], "fsync": ["posix/io/sync/fsync"],
        "open": ["posix/io/oc/open"]}
RENAMES = ["posix/io/dir/rename"]   # outputs put in place (an exchange, renameat2, is one step)
STRERROR = {"ENOSPC": "No space left on device", "EIO": "Input/output error",
            "EROFS": "Read-only file system", "ENOENT": "No such file or directory"}
HANG_FACTOR = 6          # a command running this many times its uninterrupted time is hung


def fiu_available() -> bool:
    return all(p.is_file() for p in PRELOAD)


# ---------------------------------------------------------------- running the command

def _env(s: Scenario, plan: str | None, points: list[str], record: Path | None) -> dict[str, str]:
    env = {**os.environ, **s.env, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH")]))}
    if plan is not None:
        env.update(LD_PRELOAD=":".join(map(str, PRELOAD)), CRASH_POINTS=",".join(points),
                   CRASH_RECORD=str(record or ""))
    return env


def launch(s: Scenario, root: Path, plan: str | None = None, points: list[str] = (),
           record: Path | None = None, vanish: Path | None = None) -> subprocess.Popen:
    args = [*s.args, "--root", str(root)]
    argv = ([sys.executable, "-m", "stages.tools.faults.crash_child", plan, "--", *args] if plan is not None
            else [sys.executable, "-m", "stages.cli", *args])
    env = _env(s, plan, list(points), record)
    if vanish is not None:
        env["CRASH_VANISH"] = str(vanish)
    return subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        return 124, err + f"\nhung: killed after {timeout:.0f} s"
    _reap(proc.pid)
    return proc.returncode, err


def _reap(pgid: int) -> None:
    """Kill what the command left running in its process group (an engine it started in its
    own group is the command's to stop, and is not touched)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_clean(s: Scenario, root: Path, timeout: float = 900) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    rc, err = finish(launch(s, root), timeout)
    return rc, err, time.perf_counter() - t0


def copy_state(base: Path, dest: Path) -> Path:
    if dest.exists():
        remove(dest)
    shutil.copytree(base, dest, symlinks=True)
    return dest / "project"


def remove(folder: Path) -> None:
    make_writable(folder)
    shutil.rmtree(folder)


# ---------------------------------------------------------------- checks

def runs_digest(root: Path) -> dict[str, dict[str, str]]:
    runs = root / "data" / "runs"
    return {f.name: co.tree_state(f) for f in sorted(runs.iterdir())
            if f.is_dir() and not f.name.startswith(".")} if runs.is_dir() else {}


def runs_changed(root: Path, before: dict[str, dict[str, str]]) -> list[str]:
    """Run folders of the state before that lost, changed or gained a file (a manifest written
    by a seal is allowed when it lists the folder whole)."""
    now = runs_digest(root)
    changed = []
    for run_id, files in before.items():
        have = now.get(run_id)
        if have is None:
            changed.append(f"{run_id}: gone")
            continue
        for name in sorted(set(files) | set(have)):
            if files.get(name) == have.get(name):
                continue
            folder = root / "data" / "runs" / run_id
            if name == RUN_MANIFEST and name not in files and \
                    (folder / name).read_text() == manifest_text(folder):
                continue
            changed.append(f"{run_id}/{name}")
    return changed


def locks_held(root: Path) -> list[str]:
    held = []
    for lock in sorted((root / "data" / ".locks").glob("*.lock")):
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(lock.name)
        finally:
            os.close(fd)
    return held

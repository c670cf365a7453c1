"""Provenance helpers shared by the stages: the project's commit, file digests, the run manifest.

A run folder is sealed (`seal`) with RUN_MANIFEST (`sha256sum -c` reads it) by the run stage, by
`campaign seal`, or by ingest when a folder arrives without one; ingest checks it. The published
site archive carries its own manifest in the same format.
"""
from __future__ import annotations

import hashlib
import glob
import os
import re
import stat
import subprocess
import time
from pathlib import Path

from stages.core.files import process_alive

RUN_MANIFEST = "MANIFEST.sha256"
# The record `campaign import` writes into a run folder it brought in (where it came from, when,
# by whom, each file's sha256, the profile and spec); ingest reads it where meta.json is absent.
IMPORT_RECORD = "import.json"
# The GPU sampler's file of a benchmark point: gpu/<point_id>.csv of the run folder (the run stage
# writes it, ingest reads it).
GPU_SAMPLES_FOLDER, GPU_SAMPLES_SUFFIX = "gpu", ".csv"
# The engine profiler's trace of a profiled point: profile/<point_id>.<anything>.pt.trace.json.gz
# (one file per worker), read by ingest (stages/ingest/parsers/profile_trace.py).
PROFILE_FOLDER = "profile"
# Beside a CPU engine's trace, vLLM's profiler writes its table of operator totals made from it
# (<worker>.profiler_out.txt): kept as the engine wrote it, read by no one.
PROFILE_TABLE_SUFFIX = ".profiler_out.txt"
# The /metrics sampler's file of a benchmark point (or multi-turn workload): bench/<point_id> with
# this suffix (the run stage writes it, ingest reads it).
METRICS_SERIES_SUFFIX = ".metrics-series.txt"
_SHA = re.compile(r"[0-9a-f]{40}")


def git_sha(root: Path) -> str | None:
    """The commit checked out at root; None outside git, or in a copy of the tree without its
    history (where `git rev-parse HEAD` answers with the literal word HEAD)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and _SHA.fullmatch(sha) else None


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# A folder whose launch.out records no run_status may be one a run stage is still writing; it is
# taken as finished once nothing in it has changed for this long (a running engine logs far more
# often, and a run stage appends to launch.out at every step).
AT_REST_S = 3600
# A run inside a Slurm job names its job in launch.out; it is not finished when the job's run
# records its end, but once the submitter has added Slurm's record of the job (and sealed it).
SLURM_JOB_KEY, SLURM_STATE_KEY = "slurm_job_id", "slurm_state"


def at_rest(folder: Path, now: float | None = None) -> bool:
    """Whether no run stage is writing `folder` any more: its launch.out records the run's end
    (`run_status=`, and for a run in a Slurm job also Slurm's state, which the submitter adds), or
    no file in it changed for AT_REST_S. Links are not followed. The storage failing while it
    looks (any error but launch.out being absent or unreadable to this user) is raised: it says
    nothing of the run."""
    folder = Path(folder)
    launch_out = folder / "launch.out"
    try:
        if stat.S_ISREG(os.lstat(launch_out).st_mode):
            with launch_out.open("rb") as f:
                keys = {line.split(b"=", 1)[0] for line in f.read(1 << 20).splitlines()}
            in_slurm = SLURM_JOB_KEY.encode() in keys
            if b"run_status" in keys and (not in_slurm or SLURM_STATE_KEY.encode() in keys):
                return True
    except (FileNotFoundError, PermissionError):
        pass
    newest = max((os.lstat(os.path.join(d, n)).st_mtime
                  for d, _, names in os.walk(folder, onerror=raise_storage_fault) for n in names),
                 default=0.0)
    return (time.time() if now is None else now) - newest >= AT_REST_S


def raise_storage_fault(exc: OSError) -> None:
    """os.walk's onerror: a folder the storage failed to list (an I/O error, a full or read-only
    disk, a folder gone) stops the walk, raised; one this user may not list is left out, as
    os.walk does by default."""
    if not isinstance(exc, PermissionError):
        raise exc


def write_once(path: Path, text: str, *, scratch: Path) -> None:
    """Write a file that must not exist yet, whole or not at all: the text goes to a scratch file
    in `scratch` (a folder on the same file system, outside the folder being written, so that a
    process killed half way leaves nothing in it), is synced, then linked to `path` (which fails
    if `path` exists: a file is never replaced). A failed write names the path."""
    stem = clear_stale(path, scratch=scratch)
    tmp = Path(scratch) / f"{stem}{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            data = text.encode()
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, path)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def clear_stale(path: Path, *, scratch: Path) -> str:
    """Remove the scratch files of writers of `path` killed half way (after linking it, too);
    returns the scratch files' name stem."""
    stem = f".{path.parent.name}.{path.name}.tmp-"
    for stale in Path(scratch).glob(glob.escape(stem) + "*"):
        pid = stale.name[len(stem):]
        if pid.isdigit() and not process_alive(int(pid)):
            stale.unlink(missing_ok=True)
    return stem




READ_ONLY_FILE = 0o444
READ_ONLY_FOLDER = 0o555


def manifest_text(folder: Path) -> str:
    """A run folder's manifest as `seal` writes it: the sha256 and name of every regular file in
    it but the manifest (the format `sha256sum -c` reads); links are neither hashed nor followed."""
    manifest = folder / RUN_MANIFEST
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink() and p != manifest)
    return "".join(f"{file_sha256(p)}  {p.relative_to(folder).as_posix()}\n" for p in files)


def seal(folder: Path) -> Path:
    """Make a run folder write-once: a manifest of every file's sha256 (the format `sha256sum -c`
    reads), written only when the folder has none (an existing manifest is never rewritten), then
    every file and every folder in it, itself included, read-only, so that no file can be edited,
    replaced or added. Links are neither hashed nor followed. Idempotent. Returns the manifest."""
    folder = Path(folder)
    manifest = folder / RUN_MANIFEST
    if not manifest.exists():
        write_once(manifest, manifest_text(folder), scratch=folder.parent)
    else:
        clear_stale(manifest, scratch=folder.parent)   # a seal killed after linking it
    for dirpath, dirnames, filenames in os.walk(folder, topdown=False):
        here = Path(dirpath)
        for name in filenames:
            if not (here / name).is_symlink():
                (here / name).chmod(READ_ONLY_FILE)
        for name in dirnames:
            if not (here / name).is_symlink():
                (here / name).chmod(READ_ONLY_FOLDER)
    folder.chmod(READ_ONLY_FOLDER)
    return manifest

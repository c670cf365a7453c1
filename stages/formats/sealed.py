"""A run folder written once: its files written whole or not at all (write_once), the manifest of
every file's sha256 (RUN_MANIFEST, the format `sha256sum -c` reads) and the seal that makes the
folder read-only (seal), and whether a run stage is still writing it (at_rest).

A run folder is sealed by the run stage, by Slurm's submitter once it has added Slurm's record, by
`campaign seal`, by `campaign import`, or by ingest when a folder arrives without one; ingest
checks it. The published site archive carries its own manifest in the same format.
"""
from __future__ import annotations

import glob
import os
import stat
import time
from pathlib import Path

from stages.core.files import process_alive
from stages.core.provenance import file_sha256, raise_storage_fault
from stages.formats.launch_out import SLURM_JOB_KEY, SLURM_STATE_KEY, launch_facts
from stages.formats.run_folder import LAUNCH_OUT

RUN_MANIFEST = "MANIFEST.sha256"
# A folder whose launch.out records no run_status may be one a run stage is still writing; it is
# taken as finished once nothing in it has changed for this long (a running engine logs far more
# often, and a run stage appends to launch.out at every step).
AT_REST_S = 3600


def at_rest(folder: Path, now: float | None = None) -> bool:
    """Whether no run stage is writing `folder` any more: its launch.out records the run's end
    (`run_status=`, and for a run in a Slurm job also Slurm's state, which the submitter adds), or
    no file in it changed for AT_REST_S. Links are not followed. The storage failing while it
    looks (any error but launch.out being absent or unreadable to this user) is raised: it says
    nothing of the run."""
    folder = Path(folder)
    launch_out = folder / LAUNCH_OUT
    try:
        if stat.S_ISREG(os.lstat(launch_out).st_mode):
            with launch_out.open("rb") as f:
                facts = launch_facts(f.read(1 << 20))
            in_slurm = SLURM_JOB_KEY in facts
            if "run_status" in facts and (not in_slurm or SLURM_STATE_KEY in facts):
                return True
    except (FileNotFoundError, PermissionError):
        pass
    newest = max((os.lstat(os.path.join(d, n)).st_mtime
                  for d, _, names in os.walk(folder, onerror=raise_storage_fault) for n in names),
                 default=0.0)
    return (time.time() if now is None else now) - newest >= AT_REST_S


def write_once(path: Path, text: str | bytes, *, scratch: Path) -> None:
    """Write a file that must not exist yet, whole or not at all: the text (as UTF-8) or bytes go
    to a scratch file in `scratch` (a folder on the same file system, outside the folder being
    written, so that a process killed half way leaves nothing in it), are synced, then linked to
    `path` (which fails if `path` exists: a file is never replaced). A failed write names the path."""
    stem = clear_stale(path, scratch=scratch)
    tmp = Path(scratch) / f"{stem}{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            data = text.encode() if isinstance(text, str) else text
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

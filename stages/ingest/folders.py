"""The run folders ingest reads: the listing of the runs folder (run-id refusals), each folder's
fingerprint (its files' stat fields and the code version), and the plan of what to read, with
the seal of each folder to read (sealed first when it arrives without one).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from stages.core.config import CampaignError
from stages.core.faults import is_storage_fault, storage_fault
from stages.core.files import fingerprint, folder_stats
from stages.formats.sealed import RUN_MANIFEST, at_rest, seal, write_once
from stages.core import code
from stages.core import rawfile
from stages.formats.run_folder import is_run_id
from stages.ingest.parsers import run_files
from stages.core.rawfile import Refused
from stages.core.secrets import redact_text
from stages.core.warehouse import folder_entries

MANIFEST = RUN_MANIFEST
# The code whose change re-reads every folder: the ingest stage's modules and all they import
# (parsers, the raw folders' formats, the core) and read (its SQL, the raw schema).
ENTRIES = ("stages.ingest.stage", "stages.ingest.nodes")


def code_version() -> str:
    return code.code_version(ENTRIES)[:16]


def run_folders(runs_dir: Path) -> tuple[list[Path], list[str]]:
    """The run folders under runs_dir, and why each other entry there is not one (a link; a
    name that is not a run id, shown inert): nothing in those is read."""
    folders, refused = [], []
    for path, refusal in folder_entries(runs_dir):
        name = run_files.shown(path.name)
        if refusal:
            refused.append(f"{name}: {refusal}")
        elif not is_run_id(path.name) or redact_text(path.name) != path.name:
            refused.append(f"folder name is not a run id: {name} (expected "
                           "<model>__<layout>__<ctx>__<engine>__<MMDD-HHMMSS>, letters, digits, "
                           "'.', '_', '-'); not read")
        else:
            folders.append(path)
    return folders, refused


@dataclass
class SealFound:
    """A planned folder's seal as ingest found it before reading the folder."""
    manifest_sha256: str | None          # None: the folder has no manifest
    sealed_at: datetime | None = None    # when ingest sealed it just now
    problem: str | None = None           # why ingest could not seal it


def plan_folders(folders: list[Path], known: dict[str, str], version: str,
                 seals: dict[str, str] | None = None, seal_unsealed: bool = False
                 ) -> tuple[list[Path], list[tuple[Path, list, str]], dict[str, SealFound]]:
    """The run folders, those to read (changed since their fingerprint in `known`), and the seal
    of each one to read. With `seal_unsealed`, a folder without a manifest that never had one
    (not in `seals`) is sealed first; a folder whose manifest was removed is left as it is.

    Nothing here is written to the warehouse, but what it finds is (the fingerprint, the seal):
    so the storage failing while it looks or seals stops ingest (StorageFault, one line) rather
    than being taken as a fact of the folder (unsealed, no manifest, files missing), which the
    unchanged fingerprint would keep for good. Storage that is read-only from the start (its
    mount says so) is not an error: its folders are read unsealed, each with an ingest_errors
    row saying why; so is a folder this user may not write."""
    seals = seals or {}
    plans, found = [], {}
    for folder in folders:
        try:
            plan = _plan_folder(folder, known, version, seals, seal_unsealed)
        except OSError as exc:
            if not is_storage_fault(exc):
                raise
            raise storage_fault(exc.filename or folder, exc) from None
        if plan is not None:
            plans.append(plan[0])
            found[folder.name] = plan[1]
    return folders, plans, found


def _plan_folder(folder: Path, known: dict[str, str], version: str, seals: dict[str, str],
                 seal_unsealed: bool) -> tuple[tuple[Path, list, str], SealFound] | None:
    """One folder's plan and seal (sealed first when it should be); None when it is unchanged."""
    sealed_at, problem = None, None
    mark = seal_mark(folder)
    if folder.name not in seals and os.path.lexists(folder / MANIFEST) and mark.is_file():
        # sealed by an ingest that stopped before it could record it (perhaps before it made
        # every file read-only: seal again, which keeps the manifest)
        if seal_unsealed and not folder.is_symlink() and not read_only_storage(folder):
            seal(folder)
        sealed_at = datetime.fromtimestamp(mark.stat().st_mtime, timezone.utc)
    if (seal_unsealed and folder.name not in seals and not folder.is_symlink()
            and not os.path.lexists(folder / MANIFEST) and at_rest(folder)):
        if read_only_storage(folder):
            problem = "could not seal the folder: the storage is read-only"
        else:
            try:
                mark.parent.mkdir(exist_ok=True)
                write_once(mark, "", scratch=mark.parent) if not mark.exists() else None
                seal(folder)
                sealed_at = datetime.now(timezone.utc)
            except PermissionError as exc:       # not this user's to seal: read it unsealed
                problem = f"could not seal the folder: {exc.strerror or exc}"
    stats = folder_stats(folder)
    fp = fingerprint(stats, version)
    if known.get(folder.name) == fp:
        return None
    return ((folder, [(n, size, mtime) for n, size, mtime, _, _ in stats], fp),
            SealFound(folder_manifest_sha256(folder), sealed_at, problem))


def read_only_storage(folder: Path) -> bool:
    """Whether `folder` lies on storage mounted read-only (where no seal can be written)."""
    return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)


# Ingest marks a folder it is about to seal here (a hidden folder of the runs folder, which ingest
# does not read), so that who sealed it is known even when ingest stops before recording it.
SEAL_MARKS = ".sealed-by-ingest"


def seal_mark(folder: Path) -> Path:
    return folder.parent / SEAL_MARKS / folder.name


def folder_manifest_sha256(folder: Path) -> str | None:
    """The sha256 of the folder's manifest; None when it has none (or it is not a regular file,
    or this user may not read it). The storage failing as it is read is raised: a manifest that
    could not be read is not one that is absent (a sealed folder would be stored as tampered)."""
    try:
        return rawfile.sha256(folder, MANIFEST)
    except (Refused, FileNotFoundError):
        return None
    except OSError as exc:
        if is_storage_fault(exc):
            raise OSError(exc.errno, exc.strerror, str(folder / MANIFEST)) from None
        return None


def run_folder(runs: Path, run_id: str) -> Path:
    """The folder of `run_id` under `runs`; a name that is not one is a user error."""
    folder = runs / run_id
    if (run_id in ("", ".", "..") or Path(run_id).name != run_id or run_id.startswith(".")
            or folder.is_symlink() or not folder.is_dir()):
        raise CampaignError(f"{run_id}: no run folder of that name under {runs}")
    return folder


def seal_run_folders(runs: Path, run_ids: list[str], say: Callable[[str], None]) -> dict[str, int]:
    """`campaign seal`: seal the named run folders, or with none every folder under `runs` that no
    run is still writing (stages.formats.sealed.at_rest); say what was done to each. Counts by outcome."""
    folders = [run_folder(runs, run_id) for run_id in run_ids]
    if not run_ids:
        for folder in run_folders(runs)[0]:
            if (folder / RUN_MANIFEST).exists() or at_rest(folder):
                folders.append(folder)
            else:
                say(f"left {folder.name} unsealed: a run may still be writing it "
                    "(no run_status in launch.out, or a Slurm job's without Slurm's record, "
                    "and files changed within the hour); "
                    "name it to seal it anyway")
    counts = {"sealed": 0, "made_read_only": 0, "already_sealed": 0}
    for folder in folders:
        had_manifest = (folder / RUN_MANIFEST).exists()
        was_read_only = folder.stat().st_mode & 0o222 == 0
        try:
            seal(folder)
        except OSError as exc:
            raise CampaignError(f"{exc.filename or folder}: cannot seal: {exc.strerror or exc}") from None
        if not had_manifest:
            counts["sealed"] += 1
            say(f"sealed {folder.name}: {RUN_MANIFEST} written, folder read-only")
        elif not was_read_only:
            counts["made_read_only"] += 1
            say(f"sealed {folder.name}: {RUN_MANIFEST} kept, folder made read-only")
        else:
            counts["already_sealed"] += 1
    return counts

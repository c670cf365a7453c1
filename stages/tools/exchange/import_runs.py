"""`campaign import`: run folders made before the project was adopted, brought into the runs folder.

A team's earlier run folders (`<model>__<layout>__<ctx>__<engine>__<MMDD-HHMMSS>/` with cmd.sh,
server.log, launch.out, bench/ ..., but no meta.json) are copied byte for byte, mtimes kept, each
with an `import.json` saying where it came from and which spec of params.yaml it is, then sealed
like a finished run (MANIFEST.sha256, read-only). All or nothing:

  1. every source is checked before anything is written; one refused source refuses them all;
  2. each is copied into a hidden staging folder in the runs folder itself
     (`.import-<run_id>-<pid>`, which ingest does not list), every copy's sha256 checked against
     its source's, import.json written, the folder sealed;
  3. only once every source is staged is each renamed to `<runs>/<run_id>` (same parent: the
     sealed folder need not be writable).

An error, Ctrl-C or SIGTERM before step 3 removes the staging folders; after a SIGKILL they stay
hidden, and the next import removes those whose process is gone. The CLI holds the runs folder's
write lock for the whole command.

Example:
    run(["/old/glm53__tp8_dcp8__1024k__vllm__1010-053939"], profile="h200x8", params=params,
        runs=paths.runs, progress=print)
"""
from __future__ import annotations

import contextlib
import getpass
import os
import re
import shutil
import signal
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from stages.core import rawfile
from stages.core.config import CampaignError
from stages.core.files import process_alive
from stages.formats.sealed import seal, write_once
from stages.formats.run_folder import IMPORT_RECORD, SCHEMA_VERSION, iso, record_text, utc_now
from stages.tools.exchange.import_checks import Source, check_sources, cmd_image, match_spec, shown, size_text

STAGING_PREFIX = ".import-"
_STAGING = re.compile(r"^\.import-(?P<run_id>.+)-(?P<pid>\d+)$")
_SCRATCH = re.compile(r"^\.\.import-.+-(?P<pid>\d+)\..+\.tmp-\d+$")
@dataclass
class Staged:
    source: Source
    folder: Path                    # <runs>/.import-<run_id>-<pid>
    spec: str | None = None
    files: int = 0


def stage(source: Source, profile: str, params: dict[str, Any], staged: Staged) -> None:
    """Copy `source` into `staged.folder` byte for byte (mtimes kept), check every copy's sha256,
    write import.json, seal the folder."""
    folder = staged.folder
    into = source.prefix
    if into:
        (folder / into).mkdir()
    for name in source.folders:
        (folder / into / name).mkdir()
    digests: dict[str, str] = {}
    for name in source.files:
        try:
            before = rawfile.sha256(source.path, name)   # opened as ingest would: no link followed
            shutil.copy2(source.path / name, folder / into / name, follow_symlinks=False)
            after = rawfile.sha256(folder, into + name)
        except rawfile.Refused as exc:
            raise CampaignError(f"{shown(source.given)}: {shown(name)} is now {exc.reason}; "
                                "nothing was imported") from None
        if after != before:
            raise CampaignError(f"{shown(source.given)}: {shown(name)} changed while it was "
                                "copied; nothing was imported")
        digests[into + name] = after
    for name in reversed(source.folders):                # a file copied in would have moved them
        shutil.copystat(source.path / name, folder / into / name, follow_symlinks=False)
    if into:
        shutil.copystat(source.path, folder / into, follow_symlinks=False)
    spec, why = match_spec(source.run_id, profile, params, cmd_image(folder))
    record = {"record": "import", "schema_version": SCHEMA_VERSION, "run_id": source.run_id,
              "kind": "results" if into else "run folder",
              "profile": profile, "spec": spec, "spec_match": why, "source": str(source.path),
              "source_host": socket.gethostname(), "imported_at": iso(utc_now()),
              "imported_by": getpass.getuser(), "files": digests}
    write_once(folder / IMPORT_RECORD, record_text(record), scratch=folder.parent)    # names the file if it fails
    seal(folder)
    staged.spec, staged.files = spec, len(digests)


def remove_staging(folder: Path) -> None:
    """Remove a staging folder, sealed or not: its folders made writable first."""
    if not os.path.lexists(folder) or os.path.islink(folder):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder)
        return
    os.chmod(folder, 0o755)
    for here, dirs, _ in os.walk(folder):
        for name in dirs:
            path = os.path.join(here, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755)
    shutil.rmtree(folder)


def _alive(pid: int) -> bool:
    """Whether the import that made a staging folder still runs (this process never made one
    before it started: a folder of its pid is an earlier process's)."""
    return pid != os.getpid() and process_alive(pid)


def remove_stale(runs: Path, progress: Callable[[str], None]) -> int:
    """Remove the staging folders of imports whose process is gone (killed before their end)."""
    removed = 0
    if not runs.is_dir():
        return 0
    for entry in sorted(os.listdir(runs)):
        scratch = _SCRATCH.match(entry)     # a staged folder's manifest, being written when killed
        if scratch and not _alive(int(scratch["pid"])):
            (runs / entry).unlink(missing_ok=True)
            continue
        found = _STAGING.match(entry)
        if not found:
            continue
        pid = int(found["pid"])
        if _alive(pid):
            progress(f"import: {entry} left in place: process {pid} is still running")
            continue
        remove_staging(runs / entry)
        progress(f"import: removed {entry}, left by an import that did not end (process {pid})")
        removed += 1
    return removed


# -- interrupts ------------------------------------------------------------------------------------

class Interrupts:
    """While entered, SIGINT and SIGTERM raise KeyboardInterrupt (named after the signal); inside
    `held()` they are only noted, so that a commit or a cleanup is never cut half way."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.holding = False
        self.noted: str | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.holding:
            self.noted = self.noted or name
            return
        raise KeyboardInterrupt(name)

    def __enter__(self) -> "Interrupts":
        with contextlib.suppress(ValueError):        # not the main thread: left as they are
            for sig in self.SIGNALS:
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        before, self.holding = self.holding, True
        try:
            yield
        finally:
            self.holding = before


# -- 5. the command --------------------------------------------------------------------------------

def _commit(staged: list[Staged], runs: Path) -> list[Staged]:
    """Rename every staging folder to its run id; on a failure the ones already renamed are put
    back, so that none is imported."""
    for item in staged:
        if os.path.lexists(runs / item.source.run_id):
            raise CampaignError(f"{item.source.run_id} appeared in the runs folder during the import; "
                                "nothing was imported")
    done: list[Staged] = []
    try:
        for item in staged:
            target = runs / item.source.run_id
            if os.path.lexists(target):     # os.rename would replace an empty folder
                raise CampaignError(f"{item.source.run_id} appeared in the runs folder during the "
                                    "import; nothing was imported")
            os.rename(item.folder, target)
            done.append(item)
    except BaseException:
        for item in reversed(done):
            os.rename(runs / item.source.run_id, item.folder)
        raise
    return done


def run(sources: list[str], *, profile: str, params: dict[str, Any], runs: Path,
        progress: Callable[[str], None] = lambda _: None, results_as: str | None = None) -> dict[str, Any]:
    """Import the run folders `sources` into `runs` (all or none); the summary. With
    `results_as`, the one source is a folder of benchmark result files (any tool's), imported as
    the bench/ folder of a new run of that id, which names its setup. The caller holds the runs
    folder's write lock. A KeyboardInterrupt (SIGINT, or SIGTERM) before the commit removes what
    was staged and is raised again."""
    runs = Path(runs)
    checked = check_sources(list(sources), runs, profile, params, results_as)
    staged: list[Staged] = []
    with Interrupts() as interrupts:
        try:
            runs.mkdir(parents=True, exist_ok=True)
            remove_stale(runs, progress)
            for source in checked:
                item = Staged(source, runs / f"{STAGING_PREFIX}{source.run_id}-{os.getpid()}")
                staged.append(item)
                item.folder.mkdir()
                progress(f"import: copying {source.run_id} ({len(source.files)} files, "
                         f"{size_text(source.size)}) from {source.path}")
                stage(source, profile, params, item)
            with interrupts.held():
                _commit(staged, runs)
                committed, staged = staged, []
        except BaseException as exc:
            with interrupts.held():
                for item in staged:
                    remove_staging(item.folder)
            if isinstance(exc, OSError):
                where = f"{exc.filename}: " if exc.filename else ""
                raise CampaignError(f"{where}{exc.strerror or exc}; nothing was imported") from None
            raise
    for item in committed:
        progress(f"imported {item.source.run_id} ({item.files} files, "
                 f"{size_text(item.source.size)}, spec {item.spec or 'none'})")
    if interrupts.noted:
        progress(f"import: {interrupts.noted} came during the commit, which was finished first")
    return {"imported": len(committed), "files": sum(i.files for i in committed),
            "size": size_text(sum(i.source.size for i in committed)).replace(" ", ""),
            "matched_specs": sum(i.spec is not None for i in committed),
            "runs": str(runs)}

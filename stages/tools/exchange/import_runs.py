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
import datetime as dt
import getpass
import json
import os
import re
import shutil
import signal
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from stages.core import rawfile
from stages.core.config import CampaignError
from stages.core.names import ctx_label, max_context
from stages.core.provenance import IMPORT_RECORD, RUN_MANIFEST, seal
from stages.ingest.parsers.cmd import parse_cmd
from stages.ingest.parsers.run_files import is_run_id, parse_run_id

SCHEMA_VERSION = 1
STAGING_PREFIX = ".import-"
_STAGING = re.compile(r"^\.import-(?P<run_id>.+)-(?P<pid>\d+)$")
_SCRATCH = re.compile(r"^\.\.import-.+-(?P<pid>\d+)\..+\.tmp-\d+$")
RUN_FILES = ("cmd.sh", "server.log", "launch.out")     # a run folder holds at least one of these
META = "meta.json"
BENCH = "bench"                 # where a run folder keeps its benchmark results
# A name MANIFEST.sha256 can list as `sha256sum -c` reads it back: no newline, no backslash.
_UNLISTABLE = re.compile(r"[\n\r\\]")


@dataclass
class Source:
    """A source folder that passed the checks, and what will be copied from it."""
    given: str
    path: Path                      # resolved
    run_id: str
    folders: list[str] = field(default_factory=list)     # relative posix names, parents first
    files: list[str] = field(default_factory=list)
    size: int = 0
    prefix: str = ""                # where in the run folder its files go: bench/ for results


@dataclass
class Staged:
    source: Source
    folder: Path                    # <runs>/.import-<run_id>-<pid>
    spec: str | None = None
    files: int = 0


def _shown(text: str) -> str:
    """A name from a source folder, quoted so that it is inert when printed."""
    return ascii(text)


def size_text(n: int) -> str:
    for unit, size in (("GiB", rawfile.GiB), ("MiB", rawfile.MiB), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


# -- 1. checks ------------------------------------------------------------------------------------

def _walk(src: Path, source: Source) -> list[str]:
    """Fill `source` with the folders and regular files under `src`; the problems found (any
    entry that is not a folder or a regular file, a name the manifest cannot list)."""
    problems: list[str] = []
    pending = [""]
    while pending:
        rel = pending.pop()
        here = src / rel if rel else src
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"cannot read {_shown(rel or '.')}: {exc.strerror or exc}")
            continue
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                problems.append(f"cannot read {_shown(name)}: {exc.strerror or exc}")
                continue
            if _UNLISTABLE.search(entry.name):
                problems.append(f"{_shown(name)}: a name with a newline or backslash, which "
                                f"{RUN_MANIFEST} cannot list")
            elif stat.S_ISDIR(st.st_mode):
                source.folders.append(name)
                pending.append(name)
            elif stat.S_ISREG(st.st_mode):
                if not os.access(entry.path, os.R_OK):
                    problems.append(f"cannot read {_shown(name)}: permission denied")
                source.files.append(name)
                source.size += st.st_size
            else:
                problems.append(f"contains {_shown(name)}: {rawfile.kind_of(st.st_mode)}")
    source.folders.sort(key=lambda n: (n.count("/"), n))
    source.files.sort()
    return problems


def _meta_problem(src: Path, profile: str) -> str | None:
    """Why the source's meta.json rules it out: it names another profile, or cannot be read."""
    try:
        meta = json.loads(rawfile.read_raw(src, META, rawfile.SMALL_BYTES))
    except rawfile.Refused as exc:
        return f"{META}: {exc.reason}"
    except OSError as exc:
        return f"{META}: cannot read: {exc.strerror or exc}"
    except ValueError:
        return f"{META} is not valid JSON: its profile cannot be checked"
    named = meta.get("profile") if isinstance(meta, dict) else None
    if named != profile:
        what = f"profile {_shown(named)}" if isinstance(named, str) else "no profile"
        return f"{META} names {what}, not --profile {profile}"
    return None


def check_source(given: str, runs: Path, profile: str) -> tuple[Source | None, list[str]]:
    """One source: a folder (not a link) named by a run id, not in the runs folder yet, holding
    only folders and regular files, a run folder's files, no manifest, no import record, and no
    meta.json of another profile."""
    where = Path(given)          # a trailing '/' dropped, so that lstat does not follow a link
    try:
        st = os.lstat(where)
    except OSError as exc:
        return None, [f"{exc.strerror or 'cannot read'}"]
    if stat.S_ISLNK(st.st_mode):
        return None, ["is a symbolic link: give the folder it points to"]
    if not stat.S_ISDIR(st.st_mode):
        return None, [f"is not a folder but {rawfile.kind_of(st.st_mode) or 'a file'}"]
    path = where.resolve()
    run_id = path.name
    if not is_run_id(run_id):
        return None, [f"folder name {_shown(run_id)} is not a run id "
                      "(<model>__<layout>__<ctx>__<engine>__<MMDD-HHMMSS>)"]
    problems = []
    if os.path.lexists(runs / run_id):
        problems.append(f"already in the runs folder ({runs / run_id})")
    if runs.resolve().is_relative_to(path):
        return None, problems + [f"holds the runs folder ({runs})"]
    source = Source(given=given, path=path, run_id=run_id)
    problems += _walk(path, source)
    top = {name for name in source.files if "/" not in name}
    if RUN_MANIFEST in top:
        problems.append(f"already sealed ({RUN_MANIFEST}): copy it into the runs folder as it is")
    if IMPORT_RECORD in top:
        problems.append(f"holds {IMPORT_RECORD}: it was imported before")
    if META in top:
        problem = _meta_problem(path, profile)
        if problem:
            problems.append(problem)
    if not any(rawfile.present(top, name) for name in RUN_FILES):
        problems.append(f"holds none of {', '.join(RUN_FILES)}: not a run folder")
    return source, problems


def check_results(given: str, run_id: str, runs: Path) -> tuple[Source | None, list[str]]:
    """A folder of benchmark result files (any tool's) to become the bench/ folder of a new run
    `run_id`: a folder (not a link) holding only folders and regular files, at least one."""
    where = Path(given)
    try:
        st = os.lstat(where)
    except OSError as exc:
        return None, [f"{exc.strerror or 'cannot read'}"]
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return None, ["is not a folder of result files (a link is not followed)"]
    problems = []
    if not is_run_id(run_id):
        problems.append(f"--results {_shown(run_id)} is not a run id "
                        "(<model>__<layout>__<ctx>__<engine>__<MMDD-HHMMSS>)")
    elif os.path.lexists(runs / run_id):
        problems.append(f"run {run_id} is already in the runs folder ({runs / run_id})")
    path = where.resolve()
    if runs.resolve().is_relative_to(path):
        return None, problems + [f"holds the runs folder ({runs})"]
    source = Source(given=given, path=path, run_id=run_id, prefix=BENCH + "/")
    problems += _walk(path, source)
    if not source.files:
        problems.append("holds no file")
    return source, problems


def check_sources(givens: list[str], runs: Path, profile: str, params: dict[str, Any],
                  results_as: str | None = None) -> list[Source]:
    """Every source checked; a CampaignError with one line per problem of any of them. With
    `results_as`, the one source is a folder of result files to import as run `results_as`."""
    profiles = params.get("profiles") or {}
    if profile not in profiles:
        raise CampaignError(f"--profile {profile!r} is not one of params.yaml profiles "
                            f"({', '.join(map(str, profiles)) or 'none'})")
    if not givens:
        raise CampaignError("give at least one run folder to import")
    if results_as is not None:
        if len(givens) != 1:
            raise CampaignError("--results imports one folder of result files as one run")
        source, found = check_results(givens[0], results_as, runs)
        if found:
            raise CampaignError("\n".join(f"{_shown(givens[0])}: {p}" for p in found))
        return [source]
    problems: list[str] = []
    sources: list[Source] = []
    first: dict[str, str] = {}
    for given in givens:
        source, found = check_source(given, runs, profile)
        problems += [f"{_shown(given)}: {p}" for p in found]
        if source is None:
            continue
        if source.run_id in first:
            problems.append(f"{_shown(given)}: run {source.run_id} is given twice "
                            f"(also as {_shown(first[source.run_id])})")
            continue
        first[source.run_id] = given
        sources.append(source)
    if problems:
        raise CampaignError("\n".join(problems))
    return sources


# -- spec ------------------------------------------------------------------------------------------

def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _spec_context(spec: dict[str, Any]) -> str | None:
    value = max_context(spec)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return ctx_label(value)


def match_spec(run_id: str, profile: str, params: dict[str, Any],
               image: str | None) -> tuple[str | None, str]:
    """The spec of params.yaml a run id stands for, and one sentence why: among the specs of
    `profile`, those of the run's model, layout, context and engine; of several, the one whose image is
    `image` (the one cmd.sh ran)."""
    rid = parse_run_id(run_id)
    profiles = params.get("profiles") or {}
    engine = (profiles.get(profile) or {}).get("engine")
    found = [name for name, s in (params.get("specs") or {}).items()
             if isinstance(s, dict) and s.get("profile") == profile and s.get("model") == rid.model
             and s.get("layout") == rid.layout and _spec_context(s) == rid.ctx_label
             and (s.get("engine") or engine) == rid.engine]
    what = f"model {rid.model}, layout {rid.layout}, context {rid.ctx_label} and engine {rid.engine}"
    if not found:
        return None, f"no spec of params.yaml has {what} for profile {profile}"
    if len(found) == 1:
        return found[0], f"{what} match spec {found[0]}"
    specs = params["specs"]
    by_image = [name for name in found
                if image is not None and (specs[name].get("image")
                                          or (profiles.get(profile) or {}).get("image")) == image]
    head = f"specs {_and(found)} match"
    if image is None:
        return None, f"{head}; cmd.sh names no image to pick one by"
    if len(by_image) == 1:
        return by_image[0], f"{head}; the image in cmd.sh ({image}) picks {by_image[0]}"
    if not by_image:
        return None, f"{head}; the image in cmd.sh ({image}) is the image of none of them"
    return None, f"{head}; the image in cmd.sh ({image}) is the image of {_and(by_image)} alike"


def cmd_image(folder: Path) -> str | None:
    """The container image the engine command in folder's cmd.sh ran, if any."""
    name = rawfile.present(os.listdir(folder), "cmd.sh")
    if name is None:
        return None
    try:
        text = rawfile.read_raw(folder, name, rawfile.SMALL_BYTES).decode("utf-8", "replace")
    except (rawfile.Refused, OSError):
        return None
    command, _ = parse_cmd(text)
    return command.image if command is not None else None


# -- 2-4. staging ----------------------------------------------------------------------------------

def _utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
            raise CampaignError(f"{_shown(source.given)}: {_shown(name)} is now {exc.reason}; "
                                "nothing was imported") from None
        if after != before:
            raise CampaignError(f"{_shown(source.given)}: {_shown(name)} changed while it was "
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
              "source_host": socket.gethostname(), "imported_at": _utc_now(),
              "imported_by": getpass.getuser(), "files": digests}
    try:
        with (folder / IMPORT_RECORD).open("x") as fh:
            fh.write(json.dumps(record, sort_keys=True, indent=2) + "\n")
    except OSError as exc:      # a failed write names no file by itself
        raise OSError(exc.errno, exc.strerror, str(folder / IMPORT_RECORD)) from None
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
    if pid == os.getpid():
        return False            # a folder of an earlier process that had this pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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

"""The checks `campaign import` makes before it writes anything (stages/tools/exchange/import_runs.py):
each source is a folder (or, with --results, a folder of benchmark result files) named by a run id
not yet in the runs folder, holding only plain files and folders whose names a manifest can list,
none of another profile's or already sealed; and the spec of params.yaml it is (match_spec), by
its model, layout, context and engine, and of several, by the image its cmd.sh ran.
"""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.core import rawfile
from stages.core.config import CampaignError
from stages.core.names import ctx_label, max_context
from stages.formats.sealed import RUN_MANIFEST
from stages.ingest.parsers.cmd import parse_cmd
from stages.formats.run_folder import (BENCH, CMD_SH, IMPORT_RECORD, LAUNCH_OUT, META_JSON, SERVER_LOG, is_run_id,
                                       parse_run_id)

RUN_FILES = (CMD_SH, SERVER_LOG, LAUNCH_OUT)     # a run folder holds at least one of these
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


def shown(text: str) -> str:
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
            problems.append(f"cannot read {shown(rel or '.')}: {exc.strerror or exc}")
            continue
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                problems.append(f"cannot read {shown(name)}: {exc.strerror or exc}")
                continue
            if _UNLISTABLE.search(entry.name):
                problems.append(f"{shown(name)}: a name with a newline or backslash, which "
                                f"{RUN_MANIFEST} cannot list")
            elif stat.S_ISDIR(st.st_mode):
                source.folders.append(name)
                pending.append(name)
            elif stat.S_ISREG(st.st_mode):
                if not os.access(entry.path, os.R_OK):
                    problems.append(f"cannot read {shown(name)}: permission denied")
                source.files.append(name)
                source.size += st.st_size
            else:
                problems.append(f"contains {shown(name)}: {rawfile.kind_of(st.st_mode)}")
    source.folders.sort(key=lambda n: (n.count("/"), n))
    source.files.sort()
    return problems


def _meta_problem(src: Path, profile: str) -> str | None:
    """Why the source's meta.json rules it out: it names another profile, or cannot be read."""
    try:
        meta = json.loads(rawfile.read_raw(src, META_JSON, rawfile.SMALL_BYTES))
    except rawfile.Refused as exc:
        return f"{META_JSON}: {exc.reason}"
    except OSError as exc:
        return f"{META_JSON}: cannot read: {exc.strerror or exc}"
    except ValueError:
        return f"{META_JSON} is not valid JSON: its profile cannot be checked"
    named = meta.get("profile") if isinstance(meta, dict) else None
    if named != profile:
        what = f"profile {shown(named)}" if isinstance(named, str) else "no profile"
        return f"{META_JSON} names {what}, not --profile {profile}"
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
        return None, [f"folder name {shown(run_id)} is not a run id "
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
    if META_JSON in top:
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
        problems.append(f"--results {shown(run_id)} is not a run id "
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
            raise CampaignError("\n".join(f"{shown(givens[0])}: {p}" for p in found))
        return [source]
    problems: list[str] = []
    sources: list[Source] = []
    first: dict[str, str] = {}
    for given in givens:
        source, found = check_source(given, runs, profile)
        problems += [f"{shown(given)}: {p}" for p in found]
        if source is None:
            continue
        if source.run_id in first:
            problems.append(f"{shown(given)}: run {source.run_id} is given twice "
                            f"(also as {shown(first[source.run_id])})")
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

"""launch.out, a run folder's facts as `key=value` lines, appended as each becomes known: written by
the run stage (and Slurm's submitter, which adds Slurm's record of the job), read by ingest, the
submitter and the check of a folder at rest.

One reader, strict: a line that is not `key=value` and a key given again with another value are
problems it returns (ingest records them), never raised; every `key=value` line is kept, in order.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from stages.formats.lines import ParseError, text_lines

_KEY = re.compile(r"^[A-Za-z_][\w.\-]*$")
# launch.out keys the run stage appends once per benchmark point: they may repeat.
LAUNCH_EVENT_KEYS = frozenset({"point_skipped", "point_error", "profile", "profile_error", "step_times"})
# A run inside a Slurm job names its job in launch.out; it is not finished when the job's run
# records its end, but once the submitter has added Slurm's record of the job (and sealed it).
SLURM_JOB_KEY, SLURM_STATE_KEY = "slurm_job_id", "slurm_state"


def one_line(value: Any) -> str:
    """A value as launch.out holds it: on one line, runs of white space as one space."""
    return " ".join(str(value).split())


def launch_text(**facts: Any) -> str:
    """`key=value` lines of `facts`, in order."""
    return "".join(f"{k}={one_line(v)}\n" for k, v in facts.items())


class LaunchOut:
    """launch.out: key=value lines, appended as each fact becomes known. A new one is created
    (never an existing one taken over) unless `append` (Slurm's submitter adding its record)."""

    def __init__(self, path: Path, *, append: bool = False):
        self.path = path
        if not append:
            path.open("x").close()

    def add(self, **facts: Any) -> None:
        with self.path.open("a") as f:
            f.write(launch_text(**facts))


def parse_launch_out(data: bytes) -> tuple[list[tuple[str, str, int]], list[ParseError]]:
    """(key, value, line) for each `key=value` line. A key given again with another value is an
    error naming both lines (the keys of LAUNCH_EVENT_KEYS excepted: they are appended per point);
    both lines are kept."""
    rows, errors = [], []
    first: dict[str, tuple[str, int]] = {}
    for number, text in text_lines(data):
        if text.startswith("#"):
            continue
        key, eq, value = text.partition("=")
        key = key.strip()
        if not eq or not _KEY.match(key):
            errors.append(ParseError(number, f"launch.out: not a key=value line: {text[:80]!r}"))
            continue
        value = value.strip()
        rows.append((key, value, number))
        if key in LAUNCH_EVENT_KEYS:
            continue
        seen = first.setdefault(key, (value, number))
        if seen[0] != value:
            errors.append(ParseError(number, f"launch.out: key {key} given twice with different "
                                             f"values (lines {seen[1]} and {number})"))
    return rows, errors


def launch_facts(data: bytes) -> dict[str, str]:
    """The facts of launch.out's `data` as the run ended with them: the last value of each key."""
    return {key: value for key, value, _ in parse_launch_out(data)[0]}


def read_launch_facts(path: Path, limit: int | None = None) -> dict[str, str]:
    """launch_facts of the file at `path` (its first `limit` bytes, where given); {} where it
    cannot be read."""
    try:
        with path.open("rb") as f:
            return launch_facts(f.read(-1 if limit is None else limit))
    except OSError:
        return {}

"""What GuideLLM's readers share: a point's figures as they are read (each converted once to its
column's unit, the path it came from kept), the request counts a benchmark states, and the point
row every shape becomes (its id unique within the file, its settings in metadata_json)."""
from __future__ import annotations

import json
import math
from pathlib import PurePosixPath
from typing import Any

from stages.core.numbers import summed_count
from stages.ingest.parsers.tools import common


TOOL = "guidellm"


COUNTS = (("num_prompts", "total"), ("completed", "successful"), ("failed", "errored"))


def what(value: Any) -> str:
    """What a value is, where a finite number belongs."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "NaN" if math.isnan(value) else "infinite"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def in_column_unit(number: float, column: str, unit: str | None) -> float:
    """A time in `unit` as the column wants it (milliseconds for *_ms, seconds for *_s)."""
    if unit is None or (unit, column[-3:]) == ("ms", "_ms") or (unit, column[-2:]) == ("s", "_s"):
        return number
    if column.endswith("_ms"):
        return common.millis(number, unit)
    if column.endswith("_s"):
        return common.seconds(number, unit)
    raise ValueError(f"{column} is not a time")


class Figures:
    """A point's figures as they are read: each converted once, the path it came from kept,
    and what is not a finite number where one belongs listed (the point is then left out)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.paths: dict[str, str] = {}
        self.problems: list[str] = []

    def take(self, column: str, value: Any, where: str, unit: str | None = None, whole: bool = False) -> None:
        """Figure `column` from `value` (at `where`), written by the tool in `unit` (ms, s) for a
        time, converted once to the column's own unit."""
        if value is None or value == "":
            return
        number = common.finite(value)
        if number is None:
            self.problems.append(f"{column} ({where}) is {what(value)}")
            return
        if whole:
            count = summed_count(number)
            if count is None:
                self.problems.append(f"{column} ({where}) is {value!r}, not a whole number")
                return
            self.values[column] = count
        else:
            self.values[column] = in_column_unit(number, column, unit)
        self.paths[column] = where


def nonempty_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def unique_id(pid: str, index: int, used: set[str]) -> str:
    """A point id not yet given in this file (a file named for one point that holds several
    benchmarks gives each after the first `#<position>`)."""
    if pid in used:
        pid = f"{pid}#{index}"
    used.add(pid)
    return pid


def present(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def point_row(name: str, pid: str, concurrency: int | None, line: int, figures: Figures,
               meta: dict[str, Any], version: str | None) -> dict[str, Any]:
    base, _, position = pid.partition("#")
    workload, named_concurrency, repeat = common.split_point_id(base)
    row: dict[str, Any] = {
        "point_id": pid,
        "workload": workload if workload is not None else PurePosixPath(name).name.split(".", 1)[0],
        # a later benchmark of a file named for one point has its own strategy's concurrency
        "concurrency": named_concurrency if named_concurrency is not None and not position else concurrency,
        "repeat": repeat or 1,
        "source_line": line,
        **figures.values,
        "metadata_json": json.dumps(meta, sort_keys=True, ensure_ascii=False, default=str) if meta else None,
        "tool": TOOL,
        "tool_version": version,
        "summary_paths": common.paths_json(figures.paths),
    }
    return row

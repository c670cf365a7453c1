"""What LLMPerf's readers share: the name both files of a run share and the point id it gives,
and the JSON document read with the line each record starts on, its keys flattened, its values
described where a number belongs and is not one."""
from __future__ import annotations

import json
import math
from pathlib import PurePosixPath
from typing import Any

from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import ParseError


TOOL = "llmperf"

SUMMARY_SUFFIX = "_summary"
REQUESTS_SUFFIX = "_individual_responses"


# ---------------------------------------------------------------- names and ids

def stem_of(name: str) -> str:
    return PurePosixPath(name).name.split(".", 1)[0]


def run_name(name: str) -> str:
    """The name both files of a run share: the stem less `_summary` / `_individual_responses`
    (`bench/llama_550_150_summary.json` -> `llama_550_150`); for a bare `summary.json` or
    `individual_responses.json` (the fork's schedule mode), the folder that holds it."""
    stem = stem_of(name)
    for suffix in (SUMMARY_SUFFIX, REQUESTS_SUFFIX):
        if stem == suffix[1:]:
            return PurePosixPath(name).parent.name or TOOL
        if stem.endswith(suffix):
            return stem[: -len(suffix)]
    return stem


def run_point_id(name: str) -> str:
    """The point id of file `name`, the same for the summary and the requests of one run."""
    return common.point_id(run_name(name), None, 1)


# ---------------------------------------------------------------- JSON

def line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def load(text: str) -> tuple[Any, int, ParseError | None]:
    """(the file's JSON value, the line where it starts, or the error that stops it)."""
    stripped = text.strip()
    if not stripped:
        return None, 1, ParseError(1, "empty LLMPerf result file")
    start = line_at(text, len(text) - len(text.lstrip()))
    try:
        return json.loads(stripped), start, None
    except json.JSONDecodeError as exc:
        line = start + exc.lineno - 1
        return None, start, ParseError(line, f"not valid JSON: {exc.msg} (line {line} column "
                                             f"{exc.colno}); nothing read from the file")


def record_lines(text: str, count: int) -> list[int]:
    """The line on which each of the list's `count` records starts (the file already parsed)."""
    decoder = json.JSONDecoder()
    lines: list[int] = []
    pos = text.index("[") + 1
    newlines, last = 0, 0
    for _ in range(count):
        while text[pos] in " \t\r\n,":
            pos += 1
        newlines += text.count("\n", last, pos)
        last = pos
        lines.append(newlines + 1)
        _, pos = decoder.raw_decode(text, pos)
    return lines


def flatten(obj: dict[str, Any]) -> dict[str, tuple[Any, tuple[str, ...]]]:
    """LLMPerf's flatten_dict (nested keys joined with `_`), each value keeping its real path."""
    flat: dict[str, tuple[Any, tuple[str, ...]]] = {}

    def walk(value: Any, key: str, where: tuple[str, ...]) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(v, f"{key}_{k}" if key else str(k), where + (str(k),))
        elif key not in flat:
            flat[key] = (value, where)

    walk(obj, "", ())
    return flat


def finite_number(value: Any) -> float | None:
    return common.finite(value)


def what_is(value: Any) -> str:
    """What a value is, where a number belongs and it is not one."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "infinite"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if value is None:
        return "null"
    return "a list" if isinstance(value, list) else "an object"


def jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value

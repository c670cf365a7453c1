"""What GenAI-Perf's readers share: the name a point is named from (a summary meets the
perf_analyzer export it summarises), the point's id fields, its other settings as stored, and times
converted to milliseconds the tool's own way."""
from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any

from stages.ingest.parsers.tools import common


TOOL = "genai_perf"

SUMMARY_SUFFIX = "_genai_perf"
GZ = ".gz"


INT_COLUMNS = {"completed", "num_prompts", "failed", "max_concurrency"}


def point_name(name: str) -> str:
    """The name a summary's point is named from: the perf_analyzer export it summarises
    (`bench/long__c04_genai_perf.json` -> `bench/long__c04.json`), so that the summary and the
    export's requests meet in one point."""
    path = PurePosixPath(plain_name(name))
    stem = path.name.partition(".")[0]
    if stem.endswith(SUMMARY_SUFFIX) and len(stem) > len(SUMMARY_SUFFIX):
        stem = stem[: -len(SUMMARY_SUFFIX)]
    return str(path.with_name(f"{stem}.json"))


def plain_name(name: str) -> str:
    return name[: -len(GZ)] if name.endswith(GZ) else name


def base_names(siblings: frozenset[str]) -> set[str]:
    return {PurePosixPath(plain_name(s)).name for s in siblings}


def point_fields(pid: str) -> dict[str, Any]:
    workload, concurrency, repeat = common.split_point_id(pid)
    if workload is None:
        workload = re.sub(r"__i\d+$", "", pid)
    return {"point_id": pid, "workload": workload, "concurrency": concurrency, "repeat": repeat or 1}


def first_line(text: str) -> int:
    stripped = len(text) - len(text.lstrip())
    return text.count("\n", 0, stripped) + 1


# Divisor from a unit of time to milliseconds, for a conversion done once (division, so that a
# time in ns comes out as the tool's own `value / 1e6`, and one in ms unchanged).
_PER_MS = {"ns": 1e6, "us": 1e3, "µs": 1e3, "ms": 1.0}


def to_ms(value: float, unit: str) -> float:
    """`value` in `unit` as milliseconds; a ValueError for a unit that is not one of time."""
    key = unit.strip().lower()
    if key in _PER_MS:
        return float(value) / _PER_MS[key]
    common.seconds(value, key)          # raises for an unknown unit
    return float(value) * common.SECONDS[key] * 1000.0


def stored_fields(extra: dict[str, Any], paths: dict[str, str]) -> dict[str, Any]:
    return {"metadata_json": json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None,
            "tool": TOOL, "tool_version": None, "summary_paths": common.paths_json(paths)}

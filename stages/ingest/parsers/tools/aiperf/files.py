"""What an AIPerf file is and where it sits: a summary or a per-request record by its keys, and
the name whose stem names a file's point (its own, its folder's, or its summary's), AIPerf naming
its files the same for every run."""
from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from stages.formats.lines import JsonProblem, decode, read_json_object
from stages.ingest.parsers.tools import common


TOOL = "aiperf"


# AIPerf's own artifact folder name: <model>-<service>-<endpoint>-concurrency<N>[-request_rate<R>]
_FOLDER_CONCURRENCY = re.compile(r"-concurrency(\d+)(?:-|$)")


def json_object(raw: bytes) -> dict | None:
    """The JSON object `raw` holds (formats.lines.read_json_object), else None: what a file is
    is told by its keys, and parse says what is wrong with one that is not read."""
    obj = read_json_object(decode(raw))
    return None if isinstance(obj, JsonProblem) else obj


def is_record(obj: dict) -> bool:
    meta = obj.get("metadata")
    return (isinstance(meta, dict) and "metrics" in obj
            and ("record_processor_id" in meta or "worker_id" in meta)
            and ("benchmark_phase" in meta or "credit_phase" in meta))


def is_summary(obj: dict) -> bool:
    config = obj.get("input_config")
    if not isinstance(config, dict):
        return False
    records = obj.get("records")
    tagged = isinstance(records, dict) and any(
        isinstance(v, dict) and {"tag", "header", "unit"} <= v.keys() for v in records.values())
    metrics = tagged or any(isinstance(v, dict) and "unit" in v and "avg" in v for v in obj.values())
    aiperf = (tagged or "aiperf_version" in obj or "loadgen" in config or "phases" in config
              or isinstance(config.get("models"), dict)
              or str(cli_command(obj) or "").startswith("aiperf"))
    return metrics and aiperf


def cli_command(obj: dict) -> Any:
    config = obj.get("input_config") if isinstance(obj.get("input_config"), dict) else {}
    artifacts = config.get("artifacts") if isinstance(config.get("artifacts"), dict) else {}
    run_info = obj.get("run_info") if isinstance(obj.get("run_info"), dict) else {}
    return config.get("cli_command") or artifacts.get("cli_command") or run_info.get("cli_command")


def plain_path(name: str) -> PurePosixPath:
    return PurePosixPath(name[:-3] if name.endswith(".gz") else name)


def stem_of(path: PurePosixPath) -> str:
    return path.name.split(".", 1)[0]


def names_point(stem: str) -> bool:
    return common.split_point_id(stem)[0] is not None


def point_source(name: str, summary_stem: str | None = None) -> str:
    """The name whose stem names this file's point: the file's own where its stem names a point,
    else its folder's where that does, else the summary's (a per-request file's summary stem)."""
    path = plain_path(name)
    if names_point(stem_of(path)):
        return name
    folder = path.parent.name
    if folder and names_point(folder):
        return f"{folder}.json"
    if summary_stem is not None:
        return str(path.with_name(f"{summary_stem}.json"))
    return name


def folder_concurrency(name: str) -> int | None:
    """The concurrency AIPerf's default artifact folder name states (`...-concurrency8`)."""
    match = _FOLDER_CONCURRENCY.search(plain_path(name).parent.name)
    return int(match.group(1)) if match else None


def summary_stem_of(name: str) -> str:
    """The stem of the summary written beside per-request file `name`: profile_export.jsonl sits
    beside profile_export_aiperf.json; with --profile-export-prefix P, P.jsonl beside P.json."""
    stem = stem_of(plain_path(name))
    return "profile_export_aiperf" if stem == "profile_export" else stem


def beside(name: str, siblings: frozenset[str], filename: str) -> bool:
    """Whether `filename` (or its .gz) is among the siblings of file `name`, whether siblings
    are given as bare names or as paths in the run folder."""
    folder = plain_path(name).parent
    for sibling in siblings:
        path = plain_path(sibling)
        if path.name == filename and (len(path.parts) == 1 or path.parent == folder):
            return True
    return False

"""inference-perf's lifecycle reports: a stage's (one point: its load, the successes' latency
distributions and throughput, the failures) and the summary across stages (no point), named by
what the file's name says it is."""
from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any

from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError


TOOL = "inference_perf"


# Names the tool gives its lifecycle reports (after any report_file_prefix).
ADAPTER_STAGE_NAME = re.compile(r"adapter_(.+)_stage_(\d+)_lifecycle_metrics")
_ADAPTER_NAME = re.compile(r"adapter_(.+)_lifecycle_metrics")
STAGE_NAME = re.compile(r"stage_(\d+)_lifecycle_metrics")
_SUMMARY_NAME = re.compile(r"summary_lifecycle_metrics")

# Point figures taken from a lifecycle report: column -> (JSON path, unit). Times in seconds.
_FIGURES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("num_prompts", ("load_summary", "count"), "count"),
    ("completed", ("successes", "count"), "count"),
    ("failed", ("failures", "count"), "count"),
    ("duration_s", ("benchmark_time_seconds",), "s"),
    ("total_input_tokens", ("successes", "prompt_tokens", "total"), "count"),
    ("total_output_tokens", ("successes", "output_tokens", "total"), "count"),
    ("request_throughput", ("successes", "throughput", "requests_per_sec"), "per_s"),
    ("output_throughput", ("successes", "throughput", "output_tokens_per_sec"), "per_s"),
    ("total_token_throughput", ("successes", "throughput", "total_tokens_per_sec"), "per_s"),
)
# Distributions of successes.latency: column stem -> (key, statistics read).
_DISTRIBUTIONS = (
    ("ttft", "time_to_first_token", ("mean", "median", "p90", "p99")),
    ("tpot", "time_per_output_token", ("mean", "median", "p90", "p99")),
    ("itl", "inter_token_latency", ("mean", "median")),
    ("e2el", "request_latency", ("mean", "median")),
)
_MEDIAN_KEYS = ("median", "p50")   # p50 before v0.2.0


# ---------------------------------------------------------------- lifecycle reports

def is_lifecycle(obj: Any) -> bool:
    return (isinstance(obj, dict) and isinstance(obj.get("load_summary"), dict)
            and "count" in obj["load_summary"] and isinstance(obj.get("successes"), dict)
            and isinstance(obj["successes"].get("latency"), dict) and isinstance(obj.get("failures"), dict))


def read_report(name: str, text: str) -> BenchParse:
    """The point of a stage report (one) or of a summary report (none) from its text; errors,
    never an exception, for a text that is not a lifecycle report."""
    stripped = text.lstrip()
    if not stripped:
        return BenchParse(errors=[ParseError(1, "empty inference-perf report")])
    line = text.count("\n", 0, len(text) - len(stripped)) + 1
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return BenchParse(errors=[ParseError(exc.lineno, f"not valid JSON: {exc.msg} (line {exc.lineno} "
                                                         f"column {exc.colno}); the report is not read")])
    except RecursionError:
        return BenchParse(errors=[ParseError(line, "JSON nested too deep; the report is not read")])
    if not is_lifecycle(obj):
        return BenchParse(errors=[ParseError(line, "not an inference-perf lifecycle report (an object with "
                                                   "load_summary, successes and failures); not read")])
    return _lifecycle(name, obj, line)


def _report_kind(name: str) -> dict[str, Any]:
    """What the file's name says it is: a stage (its number), an adapter's report, the summary."""
    base = PurePosixPath(name).name
    if m := ADAPTER_STAGE_NAME.search(base):
        return {"report": "adapter_stage", "lora_adapter": m.group(1), "stage": int(m.group(2))}
    if m := _ADAPTER_NAME.search(base):
        return {"report": "adapter", "lora_adapter": m.group(1)}
    if m := STAGE_NAME.search(base):
        return {"report": "stage", "stage": int(m.group(1))}
    if _SUMMARY_NAME.search(base):
        return {"report": "summary"}
    return {}


def _lifecycle(name: str, obj: dict[str, Any], line: int) -> BenchParse:
    load = obj["load_summary"]
    kind = _report_kind(name)
    across_stages = ("requested_rate" not in load and (
        kind.get("report") in ("summary", "adapter")
        or "schedule_delay" in load or "schedule_accuracy" in load))
    if across_stages:
        return BenchParse()   # every stage together: not a point (see the module's docstring)

    problems: list[str] = []
    paths: dict[str, str] = {}
    row: dict[str, Any] = {}

    def take(column: str, parts: tuple[str, ...], unit: str) -> None:
        value = common.dig(obj, parts)
        if value is None:
            return
        where = common.path(*parts)
        number = common.finite(value)
        if number is None:
            problems.append(f"{where} is {what_is(value)}")
            return
        if unit == "count":
            if not number.is_integer() or number < 0:
                problems.append(f"{where} is {value!r}, not a count")
                return
            row[column] = int(number)
        elif unit == "s":
            row[column] = common.seconds(number, "s")
        elif unit == "ms":
            row[column] = common.millis(number, "s")
        else:
            row[column] = number
        paths[column] = where

    for column, parts, unit in _FIGURES:
        take(column, parts, unit)
    latency = obj["successes"]["latency"]
    for stem, key, stats in _DISTRIBUTIONS:
        dist = latency.get(key)
        if not isinstance(dist, dict):
            if dist is not None:
                problems.append(f"{common.path('successes', 'latency', key)} is {what_is(dist)}")
            continue
        for stat in stats:
            found = next((k for k in _MEDIAN_KEYS if k in dist), None) if stat == "median" else stat
            if found is not None:
                take(f"{stat}_{stem}_ms", ("successes", "latency", key, found), "ms")

    concurrency = positive_count(load.get("concurrency"))
    if "concurrency" in load and load["concurrency"] is not None and concurrency is None:
        problems.append(f"load_summary.concurrency is {load['concurrency']!r}, not a concurrency")
    extra: dict[str, Any] = dict(kind)
    if concurrency is not None:
        row["max_concurrency"] = concurrency
        paths["max_concurrency"] = "load_summary.concurrency"
        rate = common.finite(load.get("requested_rate"))
        if rate is not None:
            extra["requested_rate"] = rate   # num_requests of the concurrent stage, not a rate
    else:
        take("request_rate", ("load_summary", "requested_rate"), "per_s")

    point_id = common.point_id(name, concurrency, 1)
    if problems:
        return BenchParse(errors=[ParseError(line, f"{point_id}: {', '.join(problems)} where a number "
                                                   "belongs; the point is left out")])
    workload, named_concurrency, repeat = common.split_point_id(point_id)
    extra.update(_settings(obj))
    row.update({
        "point_id": point_id,
        "workload": workload,
        "concurrency": named_concurrency,
        "repeat": repeat or 1,
        "source_line": line,
        "metadata_json": json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None,
        "tool": TOOL,
        "tool_version": None,   # no report of the tool records its version
        "summary_paths": common.paths_json(paths),
    })
    return BenchParse(points=[row])


def _settings(obj: dict[str, Any]) -> dict[str, Any]:
    """The report's other figures worth keeping beside the point's columns (finite numbers only)."""
    load, succ, fail = obj["load_summary"], obj["successes"], obj["failures"]
    out: dict[str, Any] = {}

    def keep(key: str, value: Any, scale: float = 1.0) -> None:
        number = common.finite(value)
        if number is not None:
            out[key] = number * scale

    keep("achieved_rate", load.get("achieved_rate"))
    keep("send_duration_s", load.get("send_duration"))
    ntpot = common.dig(succ, ("latency", "normalized_time_per_output_token"))
    if isinstance(ntpot, dict):
        keep("mean_ntpot_ms", ntpot.get("mean"), 1000.0)
        keep("median_ntpot_ms", next((ntpot[k] for k in _MEDIAN_KEYS if k in ntpot), None), 1000.0)
    keep("input_tokens_per_sec", common.dig(succ, ("throughput", "input_tokens_per_sec")))
    keep("mean_prompt_len", common.dig(succ, ("prompt_len", "mean")))
    keep("mean_output_len", common.dig(succ, ("output_len", "mean")))
    keep("cached_prompt_tokens", common.dig(succ, ("prompt_tokens", "cached")))
    keep("token_count_mismatches", succ.get("token_count_mismatches"))
    goodput = succ.get("goodput_metrics")
    if isinstance(goodput, dict):
        kept = {k: common.finite(v) for k, v in goodput.items() if common.finite(v) is not None}
        if kept:
            out["goodput"] = kept
    labels = fail.get("by_label")
    if isinstance(labels, dict):
        counts = {str(k): int(c) for k, v in labels.items()
                  if isinstance(v, dict) and (c := common.finite(v.get("count"))) is not None}
        if counts:
            out["failures_by_label"] = counts
    return out


def positive_count(value: Any) -> int | None:
    number = common.finite(value)
    return int(number) if number is not None and number.is_integer() and number > 0 else None


def what_is(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, float):
        return "NaN" if value != value else "infinite"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return repr(value)

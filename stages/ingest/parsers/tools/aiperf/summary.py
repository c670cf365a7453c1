"""An AIPerf summary (profile_export_aiperf.json, either layout) read into its point: each metric's
statistics in the columns' units, the counts completed by the error summary, and the run's
settings from input_config (loadgen through 0.5.0, phases by 0.8.0). The CSV export's reader
shares the figures and the point row."""
from __future__ import annotations

import json
import math
from typing import Any

from stages.core.numbers import positive_count
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.aiperf.files import (
    TOOL, cli_command, folder_concurrency, is_summary, point_source)
from stages.ingest.parsers.tools.common import BenchParse, ParseError


# Summary figures: column -> (metric tags, first found wins; statistic). Times in any unit of
# common.SECONDS, converted to the column's.
_TIME_FIGURES = {
    "mean_ttft_ms": (("time_to_first_token", "ttft"), "avg"),
    "median_ttft_ms": (("time_to_first_token", "ttft"), "p50"),
    "p90_ttft_ms": (("time_to_first_token", "ttft"), "p90"),
    "p99_ttft_ms": (("time_to_first_token", "ttft"), "p99"),
    "mean_tpot_ms": (("inter_token_latency",), "avg"),
    "median_tpot_ms": (("inter_token_latency",), "p50"),
    "p90_tpot_ms": (("inter_token_latency",), "p90"),
    "p99_tpot_ms": (("inter_token_latency",), "p99"),
    "mean_itl_ms": (("inter_chunk_latency",), "avg"),
    "median_itl_ms": (("inter_chunk_latency",), "p50"),
    "mean_e2el_ms": (("request_latency",), "avg"),
    "median_e2el_ms": (("request_latency",), "p50"),
    "duration_s": (("benchmark_duration",), "avg"),
}
# Rates and counts: column -> (metric tags, the units AIPerf writes them in).
_RATE_FIGURES = {
    "request_throughput": (("request_throughput",), {"requests/sec"}),
    "output_throughput": (("output_token_throughput",), {"tokens/sec"}),
    "total_token_throughput": (("total_token_throughput",), {"tokens/sec"}),
}
_COUNT_FIGURES = {
    "completed": (("request_count",), {"requests"}),
    "failed": (("error_request_count",), {"requests"}),
    "total_input_tokens": (("total_isl",), {"tokens"}),
    "total_output_tokens": (("total_osl", "benchmark_token_count"), {"tokens"}),
}


# Summary sources: JSON (either layout) and CSV give a metric's unit, its statistics and where
# each statistic stands in the file.


class Metric:
    __slots__ = ("unit", "stats", "where")

    def __init__(self, unit: Any, stats: dict[str, Any], where):
        self.unit, self.stats, self.where = unit, stats, where


def _json_metrics(obj: dict) -> dict[str, Metric]:
    """tag -> metric of a JSON summary, in the 0.1.x `records` layout or the top-level one."""
    out: dict[str, Metric] = {}
    records = obj.get("records")
    nested = isinstance(records, dict)
    source = records if nested else obj
    for tag, block in source.items():
        if not isinstance(block, dict) or "unit" not in block:
            continue
        prefix = ("records", tag) if nested else (tag,)
        out[tag] = Metric(block.get("unit"), block,
                           lambda stat, prefix=prefix: common.path(*prefix, stat))
    return out


def summary_figures(metrics: dict[str, Metric]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(figures in the columns' units, where each came from, what is wrong) of a summary."""
    row: dict[str, Any] = {}
    paths: dict[str, str] = {}
    problems: list[str] = []

    def pick(tags: tuple[str, ...]) -> tuple[str, Metric] | None:
        return next(((t, metrics[t]) for t in tags if t in metrics), None)

    for column, (tags, stat) in _TIME_FIGURES.items():
        found = pick(tags)
        if found is None or found[1].stats.get(stat) is None:
            continue
        metric = found[1]
        value, where = metric.stats[stat], metric.where(stat)
        problem = not_finite(value)
        unit = str(metric.unit).strip().lower()
        if problem is None and unit not in common.SECONDS:
            problem = f"in unknown unit {metric.unit!r}"
        if problem:
            problems.append(f"{where} is {problem}")
            continue
        row[column] = common.seconds(value, unit) if column.endswith("_s") else common.millis(value, unit)
        paths[column] = where
    for table, integral in ((_RATE_FIGURES, False), (_COUNT_FIGURES, True)):
        for column, (tags, units) in table.items():
            found = pick(tags)
            if found is None or found[1].stats.get("avg") is None:
                continue
            metric = found[1]
            value, where = metric.stats["avg"], metric.where("avg")
            problem = not_finite(value)
            if problem is None and str(metric.unit).strip() not in units:
                problem = f"in unit {metric.unit!r}, not {' or '.join(sorted(units))}"
            if problem is None and integral and float(value) != int(value):
                problem = "not a whole number"
            if problem:
                problems.append(f"{where} is {problem}")
                continue
            row[column] = int(value) if integral else float(value)
            paths[column] = where
    return row, paths, problems


def not_finite(value: Any) -> str | None:
    """What `value` is where a finite number belongs; None when it is one."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        if math.isnan(value):
            return "NaN"
        return None if math.isfinite(value) else "infinite"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def parse_summary(name: str, data: bytes) -> BenchParse:
    result = BenchParse()
    text, obj, invalid = common.read_json(data, "empty AIPerf summary file", "AIPerf summary is not valid JSON",
                                          "no point read")
    if invalid is not None:
        result.errors.append(invalid)
        return result
    if not isinstance(obj, dict) or not is_summary(obj):
        result.errors.append(ParseError(1, "not an AIPerf summary (no input_config beside metric "
                                           "objects); no point read"))
        return result
    first = len(text) - len(text.lstrip())
    line = text.count("\n", 0, first) + 1
    settings = _settings(obj)
    concurrency = settings.pop("concurrency", None)
    pid = common.point_id(point_source(name), concurrency if concurrency is not None
                          else folder_concurrency(name))
    row, paths, problems = summary_figures(_json_metrics(obj))
    if problems:
        result.errors.append(ParseError(line, f"{pid}: {', '.join(problems)} where a number belongs; "
                                              "the point is left out"))
        return result
    if row.get("completed") is not None and "failed" not in row:
        failed, where = _failed_from_errors(obj.get("error_summary"))
        if failed is not None:
            row["failed"] = failed
            settings["failed_from"] = where
    complete_sent(row, settings)
    point = point_row(pid, line, row, paths, settings, concurrency)
    point["model_id"] = settings.pop("model_id", None)
    point["backend"] = settings.pop("endpoint_type", None)
    point["date"] = settings.pop("start_time", None)
    point["request_rate"] = settings.pop("request_rate", None)
    point["max_concurrency"] = concurrency
    tool_version = obj.get("aiperf_version")
    point["tool_version"] = str(tool_version) if isinstance(tool_version, (str, int, float)) else None
    point["metadata_json"] = json.dumps(settings, sort_keys=True, ensure_ascii=False) if settings else None
    result.points.append(point)
    return result


def point_row(pid: str, line: int, row: dict, paths: dict, settings: dict,
               concurrency: int | None) -> dict[str, Any]:
    workload, named_concurrency, repeat = common.split_point_id(pid)
    trial = settings.get("trial")
    if not repeat and isinstance(trial, int) and not isinstance(trial, bool) and trial >= 0:
        repeat = trial + 1  # run_info.trial counts from 0 (a single run is trial 0)
    point: dict[str, Any] = {
        "point_id": pid, "workload": workload,
        "concurrency": named_concurrency if named_concurrency is not None else concurrency,
        "repeat": repeat or 1, "source_line": line, "tool": TOOL,
        "summary_paths": common.paths_json(paths),
    }
    point.update(row)
    return point


def complete_sent(row: dict, settings: dict) -> None:
    """num_prompts, the requests sent: those that succeeded plus those that failed."""
    if row.get("completed") is not None and row.get("failed") is not None:
        row["num_prompts"] = row["completed"] + row["failed"]
        settings["num_prompts_from"] = "completed + failed"


def _failed_from_errors(summary: Any) -> tuple[int | None, str | None]:
    """The failed requests where the summary has no error_request_count (AIPerf writes none when
    no request failed): the sum of error_summary's counts, 0 for an empty list."""
    if not isinstance(summary, list):
        return None, None
    total = 0
    for entry in summary:
        count = entry.get("count") if isinstance(entry, dict) else None
        if not_finite(count) is not None or int(count) != count or count < 0:
            return None, None
        total += int(count)
    return total, "error_summary[*].count"


def _settings(obj: dict) -> dict[str, Any]:
    """The run's settings worth keeping, from input_config (both layouts) and the file's header:
    concurrency, request_rate, model_id, endpoint_type, start_time are taken out by the caller."""
    config = obj["input_config"]
    endpoint = config.get("endpoint") if isinstance(config.get("endpoint"), dict) else {}
    loadgen = config.get("loadgen") if isinstance(config.get("loadgen"), dict) else {}
    out: dict[str, Any] = {}

    models: list[str] = []
    if isinstance(endpoint.get("model_names"), list):
        models = [str(m) for m in endpoint["model_names"] if isinstance(m, str)]
    elif isinstance(config.get("models"), dict) and isinstance(config["models"].get("items"), list):
        models = [str(m["name"]) for m in config["models"]["items"]
                  if isinstance(m, dict) and isinstance(m.get("name"), str)]
    if models:
        out["model_id"] = models[0]
        if len(models) > 1:
            out["models"] = models

    concurrency = rate = None
    if loadgen:
        concurrency = positive_count(loadgen.get("concurrency"))
        rate = loadgen.get("request_rate")
        for key in ("request_count", "request_rate_mode", "warmup_request_count",
                    "benchmark_duration", "request_cancellation_rate"):
            if isinstance(loadgen.get(key), (str, int, float)) and not isinstance(loadgen.get(key), bool):
                out[key] = loadgen[key]
    phases = config.get("phases")
    if isinstance(phases, list):
        included = [p for p in phases if isinstance(p, dict) and not p.get("exclude_from_results")]
        profiling = [p for p in included if p.get("name") == "profiling"] or included
        if len(profiling) == 1:
            phase = profiling[0]
            concurrency = positive_count(phase.get("concurrency"))
            rate = phase.get("rate", phase.get("request_rate"))
            for key, as_key in (("type", "phase_type"), ("requests", "request_count"),
                                ("duration", "benchmark_duration")):
                if isinstance(phase.get(key), (str, int, float)) and not isinstance(phase.get(key), bool):
                    out[as_key] = phase[key]
        warmup = [p for p in phases if isinstance(p, dict) and p.get("exclude_from_results")]
        if len(warmup) == 1 and isinstance(warmup[0].get("requests"), int):
            out["warmup_request_count"] = warmup[0]["requests"]
        if len(profiling) > 1:
            out["phases"] = [p.get("name") for p in profiling]
    if concurrency is not None:
        out["concurrency"] = concurrency
    if common.finite(rate) is not None and rate > 0:
        out["request_rate"] = float(rate)

    if isinstance(endpoint.get("type"), str):
        out["endpoint_type"] = endpoint["type"]
    if isinstance(endpoint.get("streaming"), bool):
        out["streaming"] = endpoint["streaming"]
    cli = cli_command(obj)
    if isinstance(cli, str):
        out["cli_command"] = cli
    run_info = obj.get("run_info") if isinstance(obj.get("run_info"), dict) else {}
    for key in ("trial", "random_seed"):
        if isinstance(run_info.get(key), int) and not isinstance(run_info.get(key), bool):
            out[key] = run_info[key]
    for key in ("schema_version", "benchmark_id", "start_time", "end_time", "was_cancelled"):
        value = obj.get(key)
        if isinstance(value, (str, bool, int, float)):
            out[key] = value
    errors = obj.get("error_summary")
    if isinstance(errors, list) and errors:
        out["errors"] = {
            str((e.get("error_details") or {}).get("type")): e.get("count")
            for e in errors if isinstance(e, dict) and isinstance(e.get("error_details"), dict)}
    return out

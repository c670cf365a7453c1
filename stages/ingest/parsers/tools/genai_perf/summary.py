"""GenAI-Perf's summary JSON (`*_genai_perf.json`, flat input_config through 0.0.12, nested from
0.0.13) read into its point: each metric's statistics, the counts, and input_config's settings."""
from __future__ import annotations

import math
from typing import Any

from stages.core.numbers import positive_count
from stages.ingest.parsers.bench_json import not_a_number
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError
from stages.ingest.parsers.tools.genai_perf.names import (
    INT_COLUMNS, first_line, point_fields, point_name, stored_fields, to_ms)


# Summary metric -> {stat -> column}. The time per output token is the tool's
# inter_token_latency from 0.0.3 on (see the module's docstring).
TTFT = {"avg": "mean_ttft_ms", "p50": "median_ttft_ms", "p90": "p90_ttft_ms", "p99": "p99_ttft_ms"}
TPOT = {"avg": "mean_tpot_ms", "p50": "median_tpot_ms", "p90": "p90_tpot_ms", "p99": "p99_tpot_ms"}
ITL = {"avg": "mean_itl_ms", "p50": "median_itl_ms"}
E2EL = {"avg": "mean_e2el_ms", "p50": "median_e2el_ms"}
_TIME_METRICS = {"time_to_first_token": TTFT, "request_latency": E2EL}
_RATE_METRICS = {"request_throughput": "request_throughput",
                 "output_token_throughput": "output_throughput"}
RATE_UNITS = {"request_throughput": {"requests/sec", "per sec"},
               "output_token_throughput": {"tokens/sec", "per sec"}}
# Figures that have no column, kept in metadata_json under these names.
_EXTRA_FIGURES = {
    ("time_to_second_token", "avg"): "mean_ttst_ms", ("time_to_second_token", "p50"): "median_ttst_ms",
    ("output_sequence_length", "avg"): "mean_output_tokens",
    ("output_sequence_length", "p50"): "median_output_tokens",
    ("num_output_token", "avg"): "mean_output_tokens", ("num_output_token", "p50"): "median_output_tokens",
    ("input_sequence_length", "avg"): "mean_input_tokens",
    ("input_sequence_length", "p50"): "median_input_tokens",
    ("num_input_token", "avg"): "mean_input_tokens", ("num_input_token", "p50"): "median_input_tokens",
    ("output_token_throughput_per_user", "avg"): "mean_output_tokens_per_s_per_user",
    ("output_token_throughput_per_user", "p50"): "median_output_tokens_per_s_per_user",
    ("output_token_throughput_per_request", "avg"): "mean_output_tokens_per_s_per_request",
    ("request_goodput", "avg"): "request_goodput",
}
_TIME_EXTRAS = {"mean_ttst_ms", "median_ttst_ms"}


# input_config settings kept in metadata_json: name -> (path in 0.0.3 - 0.0.12, path from 0.0.13).
_SETTINGS = {
    "service_kind": (("service_kind",), ("endpoint", "service_kind")),
    "endpoint_type": (("endpoint_type",), ("endpoint", "type")),
    "endpoint": (("endpoint",), ("endpoint", "custom")),
    "streaming": (("streaming",), ("endpoint", "streaming")),
    "request_rate": (("request_rate",), ("perf_analyzer", "stimulus", "request_rate")),
    "measurement_interval_ms": (("measurement_interval",), None),
    "measurement": (None, ("perf_analyzer", "measurement")),
    "request_count_setting": (("request_count",), None),
    "warmup_request_count": (("warmup_request_count",), ("perf_analyzer", "warmup_request_count")),
    "stability_percentage": (("stability_percentage",), ("perf_analyzer", "stability_percentage")),
    "prompt_set_size": (("num_dataset_entries",), ("input", "num_dataset_entries")),
    "synthetic_input_tokens_mean": (("synthetic_input_tokens_mean",),
                                    ("input", "synthetic_tokens", "mean")),
    "synthetic_input_tokens_stddev": (("synthetic_input_tokens_stddev",),
                                      ("input", "synthetic_tokens", "stddev")),
    "output_tokens_mean": (("output_tokens_mean",), ("input", "output_tokens", "mean")),
    "output_tokens_stddev": (("output_tokens_stddev",), ("input", "output_tokens", "stddev")),
    "output_tokens_mean_deterministic": (("output_tokens_mean_deterministic",),
                                         ("input", "output_tokens", "deterministic")),
    "random_seed": (("random_seed",), ("input", "random_seed")),
    "prompt_source": (("prompt_source",), ("input", "prompt_source")),
    "extra_inputs": (("extra_inputs",), ("input", "extra")),
    "goodput": (("goodput",), ("input", "goodput")),
    "tokenizer": (("tokenizer",), ("tokenizer", "name")),
    "subcommand": (("subcommand",), ("subcommand",)),
}


def is_summary(obj: Any) -> bool:
    """A genai-perf summary object: its input_config has genai-perf's own settings (flat: model,
    service_kind and endpoint_type; nested: model_names and perf_analyzer), none of AIPerf's
    (loadgen, cli_command), and at least one metric object with a unit."""
    if not isinstance(obj, dict) or not isinstance(obj.get("input_config"), dict):
        return False
    if obj.keys() & {"records", "aiperf_version", "schema_version", "was_cancelled"}:
        return False
    config = obj["input_config"]
    if config.keys() & {"loadgen", "cli_command"}:
        return False
    flat = {"model", "service_kind", "endpoint_type"} <= config.keys()
    nested = "model_names" in config and isinstance(config.get("perf_analyzer"), dict)
    metric = any(isinstance(v, dict) and "unit" in v for k, v in obj.items() if k != "input_config")
    return (flat or nested) and metric


# ---------------------------------------------------------------- summary JSON

def parse_summary(name: str, data: bytes) -> BenchParse:
    result = BenchParse()
    text, obj, invalid = common.read_json(data, "empty GenAI-Perf summary", "not valid JSON", "no point read")
    if invalid is not None:
        result.errors.append(invalid)
        return result
    line = first_line(text)
    if not is_summary(obj):
        result.errors.append(ParseError(line, "not a GenAI-Perf summary (no input_config of "
                                              "genai-perf's, or no metric); no point read"))
        return result
    config = obj["input_config"]
    nested = "perf_analyzer" in config
    settings = _settings(config, nested)
    concurrency = positive_count(common.dig(config, ("perf_analyzer", "stimulus", "concurrency") if nested
                              else ("concurrency",)))
    pid = common.point_id(point_name(name), concurrency, 1)

    row: dict[str, Any] = {**point_fields(pid), "source_line": line}
    paths: dict[str, str] = {}
    extra: dict[str, Any] = {}
    problems: list[str] = []
    streaming = settings.get("streaming")
    ns_units = any(isinstance(v, dict) and v.get("unit") == "ns" for v in obj.values())

    def take(metric: str, stat: str, column: str, unit: str | None) -> None:
        block = obj.get(metric)
        if not isinstance(block, dict) or stat not in block:
            return
        where = common.path(metric, stat)
        value = block[stat]
        problem = not_a_number(value)
        if problem or value is None:
            problems.append(f"{where} is {problem or 'null'} where a number belongs")
            return
        if unit is not None:
            try:
                value = to_ms(value, unit)
            except ValueError:
                problems.append(f"{common.path(metric, 'unit')} is {unit!r}, not a unit of time")
                return
        if column in INT_COLUMNS:
            if float(value) != int(value):
                problems.append(f"{where} is {value}, not a whole count")
                return
            value = int(value)
        row[column] = float(value) if column not in INT_COLUMNS else value
        paths[column] = where

    for metric, columns in (*_TIME_METRICS.items(), ("inter_token_latency", TPOT)):
        block = obj.get(metric)
        if not isinstance(block, dict):
            continue
        unit = block.get("unit")
        if not isinstance(unit, str):
            problems.append(f"{common.path(metric, 'unit')} is {not_a_number(unit) or 'missing'}, "
                            "not a unit")
            continue
        if metric == "time_to_first_token" and streaming is False:
            extra["ttft_left_out"] = ("not streamed: the tool's time_to_first_token is the "
                                      "whole response's time")
            continue
        for stat, column in columns.items():
            take(metric, stat, column, unit)
    for metric, column in _RATE_METRICS.items():
        block = obj.get(metric)
        if not isinstance(block, dict):
            continue
        unit = block.get("unit")
        if unit not in RATE_UNITS[metric]:
            problems.append(f"{common.path(metric, 'unit')} is {unit!r}, not a rate it is known by")
            continue
        take(metric, "avg", column, None)
    if isinstance(obj.get("request_count"), dict):
        take("request_count", "avg", "completed", None)
    for (metric, stat), key in _EXTRA_FIGURES.items():
        block = obj.get(metric)
        if isinstance(block, dict) and common.finite(block.get(stat)) is not None:
            value = block[stat]
            if key in _TIME_EXTRAS:
                try:
                    value = to_ms(value, str(block.get("unit", "")))
                except ValueError:
                    continue
            extra[key] = value

    if problems:
        result.errors.append(ParseError(line, f"{pid}: {', '.join(problems)}; the point is left out"))
        return result
    models = common.dig(config, ("model_names",) if nested else ("model",))
    if isinstance(models, list) and len(models) == 1 and isinstance(models[0], str):
        row["model_id"] = models[0]
    elif isinstance(models, list) and models:
        extra["models"] = models
    if settings.get("service_kind"):
        row["backend"] = str(settings["service_kind"])
    if settings.get("service_kind") == "triton":
        triton_backend = common.dig(config, ("endpoint", "backend") if nested else ("backend",))
        if triton_backend not in (None, ""):
            extra["triton_backend"] = triton_backend
    if concurrency is not None:
        row["max_concurrency"] = concurrency
    rate = common.finite(settings.get("request_rate"))
    if rate is not None:
        row["request_rate"] = rate
    extra.update({k: v for k, v in settings.items()
                  if k != "service_kind" and not (k == "request_rate" and "request_rate" in row)})
    extra["format"] = _summary_format(obj, nested, ns_units)
    if isinstance(obj.get("sessions"), dict):
        extra["sessions"] = len(obj["sessions"])
    row.update(stored_fields(extra, paths))
    result.points.append(row)
    return result


def _summary_format(obj: dict, nested: bool, ns_units: bool) -> str:
    if ns_units:
        return "genai-perf 0.0.3 summary JSON (ns, flat input_config)"
    if nested:
        p1 = any(isinstance(v, dict) and "p1" in v for v in obj.values())
        return f"genai-perf {'0.0.15+' if p1 else '0.0.13-0.0.14'} summary JSON (ms, nested input_config)"
    if "request_count" in obj or "time_to_second_token" in obj:
        return "genai-perf 0.0.10-0.0.12 summary JSON (ms, flat input_config)"
    return "genai-perf 0.0.4-0.0.9 summary JSON (ms, flat input_config)"


def _settings(config: dict, nested: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, (flat_path, nested_path) in _SETTINGS.items():
        where = nested_path if nested else flat_path
        if where is None:
            continue
        value = common.dig(config, where)
        if key == "prompt_set_size" and not nested and value is None:
            value = config.get("num_prompts")           # 0.0.3's name for the prompt set's size
        if value in (None, "", {}, []):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            value = str(value)
        out[key] = value
    return out

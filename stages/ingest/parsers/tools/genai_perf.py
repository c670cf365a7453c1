"""NVIDIA GenAI-Perf (triton-inference-server/perf_analyzer, genai-perf/; before August 2024
triton-inference-server/client, src/c++/perf_analyzer/genai-perf/): its summary JSON
(`<export>_genai_perf.json`), its summary CSV (`<export>_genai_perf.csv`, read only where the JSON
is not beside it) and perf_analyzer's per-request export (`<export>.json`, `--profile-export-file`).

The shapes, by release (the package's `__version__`; the files never say which):

* summary JSON: one object per metric, `{"unit": ..., "avg": ..., "p25".."p99", "min", "max",
  "std"}` (throughputs and request_count: `avg` only), then `input_config`.
  0.0.3: times in ns, `num_output_token` / `num_input_token`, flat `input_config` (argparse).
  0.0.4 – 0.0.9: times in ms, `output_sequence_length` / `input_sequence_length`.
  0.0.10 – 0.0.12: adds `request_count` and `time_to_second_token`.
  0.0.13: `input_config` nested (`model_names`, `endpoint`, `perf_analyzer.stimulus`, ...);
  `output_token_throughput_per_user` replaces `output_token_throughput_per_request`.
  0.0.15 on: adds p1, p5, p10.
* summary CSV: a table `Metric,avg,min,max,p99,p95,p90,p75,p50,p25[,p10,p5,p1]`, a blank line,
  `Metric,Value` (throughputs, request count), then GPU telemetry tables (not read). Numbers are
  written `{:,.2f}` from 0.0.4 (`"1,146.31"`), `N/A` where the tool had none. 0.0.1 heads its one
  table `Statistic,...` and names rows `time_to_first_token(ns)`; 0.0.2 – 0.0.3 write
  `Time To First Token (ns)`; 0.0.4 on `(ms)`.
* perf_analyzer export: `{"experiments": [{"experiment": {"mode", "value"}, "requests":
  [{"timestamp", "request_inputs", "response_timestamps", "response_outputs"}],
  "window_boundaries"}], "version", "service_kind", "endpoint"}`, times in ns since the epoch.

What the figures are (genai_perf/metrics, profile_data_parser):
* `inter_token_latency` from 0.0.3 on is each request's (latency - TTFT) / (output tokens - 1),
  then averaged or ranked over requests: the time per output token, read into the *_tpot_ms
  columns. 0.0.1 – 0.0.2 ranked every gap between responses (divided by the tokens in the later
  response) of every request: inter-token latency, the *_itl_ms columns. A CSV in ns written by
  0.0.2 or 0.0.3 cannot tell which it holds: its figure is kept in metadata_json only.
* `time_to_first_token` of a run that did not stream is the whole response's time: left out.
* `request_count` counts the requests that got a response with text: `completed`. The tool's
  summary says nothing of requests sent or failed; num_prompts and failed stay null. Its
  `num_prompts` / `num_dataset_entries` setting is the size of the prompt set, not a count of
  requests.
* token counts are the tool's tokenizer's count of the text (input_config's tokenizer), not the
  server's.

A per-request record becomes a request row as genai-perf reads it: for an OpenAI endpoint the
responses without text (the role chunk, an empty delta, `[DONE]`, a usage-only chunk) are
dropped first; TTFT is the first remaining response's timestamp minus the request's, the latency
the last one's. A request that was not streamed has no TTFT. Output and input tokens are the
server's `usage` where a response carries one (perf_analyzer records no token counts, and
genai-perf's tokenizer count is not in the file). Response gaps are not token gaps (a response can
carry several tokens): itl_count / itl_sum_s stay null. A request with no response, no response
with text, or an SSE `event: error` keeps its row, with its error.

Points are named from the export the three files share (`point_name`): the summary
`bench/long__c04_genai_perf.json` and the export `bench/long__c04.json` both give `long__c04`, and
`profile_export_genai_perf.json` with concurrency 8 and `profile_export.json` both give
`profile_export__c08`. The export's requests take the point id its summary will have: with the
summary's concurrency where the JSON is beside it, by position (`__i1`) where only the CSV,
which states no concurrency, is.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import PurePosixPath
from typing import Any

from stages.ingest.parsers.bench_json import not_a_number
from stages.ingest.parsers.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError

TOOL = "genai_perf"

SUMMARY_SUFFIX = "_genai_perf"
_GZ = ".gz"
# Bytes of a file recognise looks at before it parses anything.
_HEAD = 4096
# A summary is a few KB; a JSON bigger than this is not one (and is not parsed to find out).
_SUMMARY_MAX_BYTES = 16 << 20

# The request-metrics table's header, by release.
_CSV_HEADERS = {
    ("Statistic", "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25"): "0.0.1",
    ("Metric", "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25"): "0.0.2-0.0.14",
    ("Metric", "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25", "p10", "p5", "p1"):
        "0.0.15+",
}
_CSV_VALUE_HEADER = ("Metric", "Value")
_CSV_LABEL = re.compile(r"^\s*(?P<name>[A-Za-z][A-Za-z0-9 _]*?)\s*(?:\((?P<unit>[^()]*)\))?\s*$")
_PA_HEAD = re.compile(rb'^\s*\{\s*"experiments"\s*:\s*\[\s*(?:\]|\{\s*"experiment"\s*:\s*\{\s*"mode"\s*:)')

# Summary metric -> {stat -> column}. The time per output token is the tool's
# inter_token_latency from 0.0.3 on (see the module's docstring).
_TTFT = {"avg": "mean_ttft_ms", "p50": "median_ttft_ms", "p90": "p90_ttft_ms", "p99": "p99_ttft_ms"}
_TPOT = {"avg": "mean_tpot_ms", "p50": "median_tpot_ms", "p90": "p90_tpot_ms", "p99": "p99_tpot_ms"}
_ITL = {"avg": "mean_itl_ms", "p50": "median_itl_ms"}
_E2EL = {"avg": "mean_e2el_ms", "p50": "median_e2el_ms"}
_TIME_METRICS = {"time_to_first_token": _TTFT, "request_latency": _E2EL}
_RATE_METRICS = {"request_throughput": "request_throughput",
                 "output_token_throughput": "output_throughput"}
_RATE_UNITS = {"request_throughput": {"requests/sec", "per sec"},
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
_INT_COLUMNS = {"completed", "num_prompts", "failed", "max_concurrency"}

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


# ---------------------------------------------------------------- recognise

def recognise(name: str, data: bytes) -> bool:
    """GenAI-Perf's summary JSON or CSV, or perf_analyzer's per-request export, by content."""
    return _kind(data) is not None


def _kind(data: bytes) -> str | None:
    head = data[:_HEAD].lstrip(b"\xef\xbb\xbf \t\r\n")
    if _PA_HEAD.match(head):
        return "export"
    if head.startswith((b"Metric,", b"Statistic,")):
        first = decode(head.split(b"\n", 1)[0]).strip()
        return "csv" if tuple(c.strip() for c in first.split(",")) in _CSV_HEADERS else None
    if (head.startswith(b"{") and len(data) <= _SUMMARY_MAX_BYTES
            and data.find(b'"input_config"') >= 0):
        try:
            obj = json.loads(decode(data))
        except (json.JSONDecodeError, RecursionError):
            return None
        return "summary" if _is_summary(obj) else None
    return None


def _is_summary(obj: Any) -> bool:
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


# ---------------------------------------------------------------- parse

def parse(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """Point rows (summary JSON or CSV) or request rows (perf_analyzer's export) of one file;
    errors, never an exception, for a file that is not what it should be."""
    kind = _kind(data)
    if kind == "export":
        return _parse_export(name, data, siblings)
    if kind == "csv":
        return _parse_csv(name, data, siblings)
    return _parse_summary(name, data)


def point_name(name: str) -> str:
    """The name a summary's point is named from: the perf_analyzer export it summarises
    (`bench/long__c04_genai_perf.json` -> `bench/long__c04.json`), so that the summary and the
    export's requests meet in one point."""
    path = PurePosixPath(_plain(name))
    stem = path.name.partition(".")[0]
    if stem.endswith(SUMMARY_SUFFIX) and len(stem) > len(SUMMARY_SUFFIX):
        stem = stem[: -len(SUMMARY_SUFFIX)]
    return str(path.with_name(f"{stem}.json"))


def _plain(name: str) -> str:
    return name[: -len(_GZ)] if name.endswith(_GZ) else name


def _base_names(siblings: frozenset[str]) -> set[str]:
    return {PurePosixPath(_plain(s)).name for s in siblings}


def _point_fields(pid: str) -> dict[str, Any]:
    workload, concurrency, repeat = common.split_point_id(pid)
    if workload is None:
        workload = re.sub(r"__i\d+$", "", pid)
    return {"point_id": pid, "workload": workload, "concurrency": concurrency, "repeat": repeat or 1}


def _first_line(text: str) -> int:
    stripped = len(text) - len(text.lstrip())
    return text.count("\n", 0, stripped) + 1


# ---------------------------------------------------------------- summary JSON

def _parse_summary(name: str, data: bytes) -> BenchParse:
    result = BenchParse()
    text = decode(data)
    if not text.strip():
        result.errors.append(ParseError(1, "empty GenAI-Perf summary"))
        return result
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        result.errors.append(ParseError(exc.lineno, f"not valid JSON: {exc.msg} (line {exc.lineno} "
                                                    f"column {exc.colno}); no point read"))
        return result
    line = _first_line(text)
    if not _is_summary(obj):
        result.errors.append(ParseError(line, "not a GenAI-Perf summary (no input_config of "
                                              "genai-perf's, or no metric); no point read"))
        return result
    config = obj["input_config"]
    nested = "perf_analyzer" in config
    settings = _settings(config, nested)
    concurrency = _whole(_get(config, ("perf_analyzer", "stimulus", "concurrency") if nested
                              else ("concurrency",)))
    pid = common.point_id(point_name(name), concurrency, 1)

    row: dict[str, Any] = {**_point_fields(pid), "source_line": line}
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
                value = _ms(value, unit)
            except ValueError:
                problems.append(f"{common.path(metric, 'unit')} is {unit!r}, not a unit of time")
                return
        if column in _INT_COLUMNS:
            if float(value) != int(value):
                problems.append(f"{where} is {value}, not a whole count")
                return
            value = int(value)
        row[column] = float(value) if column not in _INT_COLUMNS else value
        paths[column] = where

    for metric, columns in (*_TIME_METRICS.items(), ("inter_token_latency", _TPOT)):
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
        if unit not in _RATE_UNITS[metric]:
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
                    value = _ms(value, str(block.get("unit", "")))
                except ValueError:
                    continue
            extra[key] = value

    if problems:
        result.errors.append(ParseError(line, f"{pid}: {', '.join(problems)}; the point is left out"))
        return result
    models = _get(config, ("model_names",) if nested else ("model",))
    if isinstance(models, list) and len(models) == 1 and isinstance(models[0], str):
        row["model_id"] = models[0]
    elif isinstance(models, list) and models:
        extra["models"] = models
    if settings.get("service_kind"):
        row["backend"] = str(settings["service_kind"])
    if settings.get("service_kind") == "triton":
        triton_backend = _get(config, ("endpoint", "backend") if nested else ("backend",))
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
    row.update(_common_fields(extra, paths))
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
        value = _get(config, where)
        if key == "prompt_set_size" and not nested and value is None:
            value = config.get("num_prompts")           # 0.0.3's name for the prompt set's size
        if value in (None, "", {}, []):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            value = str(value)
        out[key] = value
    return out


# Divisor from a unit of time to milliseconds, for a conversion done once (division, so that a
# time in ns comes out as the tool's own `value / 1e6`, and one in ms unchanged).
_PER_MS = {"ns": 1e6, "us": 1e3, "µs": 1e3, "ms": 1.0}


def _ms(value: float, unit: str) -> float:
    """`value` in `unit` as milliseconds; a ValueError for a unit that is not one of time."""
    key = unit.strip().lower()
    if key in _PER_MS:
        return float(value) / _PER_MS[key]
    common.seconds(value, key)          # raises for an unknown unit
    return float(value) * common.SECONDS[key] * 1000.0


def _get(obj: Any, where: tuple[str, ...]) -> Any:
    for key in where:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _whole(value: Any) -> int | None:
    number = common.finite(value)
    return int(number) if number is not None and number == int(number) and number > 0 else None


def _common_fields(extra: dict[str, Any], paths: dict[str, str]) -> dict[str, Any]:
    return {"metadata_json": json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None,
            "tool": TOOL, "tool_version": None, "summary_paths": common.paths_json(paths)}


# ---------------------------------------------------------------- summary CSV

def _parse_csv(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    result = BenchParse()
    json_name = PurePosixPath(_plain(name)).with_suffix(".json").name
    if json_name in _base_names(siblings):
        return result          # the summary JSON beside it gives this point
    text = decode(data).lstrip("\ufeff")
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        result.errors.append(ParseError(1, f"not a readable CSV: {exc}; no point read"))
        return result
    header = tuple(c.strip() for c in rows[0]) if rows else ()
    release = _CSV_HEADERS.get(header)
    if release is None:
        result.errors.append(ParseError(1, "not a GenAI-Perf summary CSV header; no point read"))
        return result
    stats = header[1:]
    pid = common.point_id(point_name(name), None, 1)
    row: dict[str, Any] = {**_point_fields(pid), "source_line": 1}
    paths: dict[str, str] = {}
    extra: dict[str, Any] = {}
    problems: list[str] = []
    ns_rows = seen_rate = False
    table = "stats"
    for number, cells in enumerate(rows[1:], start=2):
        cells = [c.strip() for c in cells]
        if not any(cells):
            table = "next"
            continue
        if table == "next":
            table = "values" if tuple(cells) == _CSV_VALUE_HEADER else "other"
            continue
        if table == "other":
            continue                    # GPU telemetry
        label = _CSV_LABEL.match(cells[0])
        if not label:
            continue
        metric = label.group("name").strip().lower().replace(" ", "_")
        unit = (label.group("unit") or "").strip()
        ns_rows = ns_rows or unit == "ns"
        if len(cells) == 2:             # a value row (0.0.1 writes them in its one table)
            seen_rate = seen_rate or metric == "request_throughput"
            _csv_value(metric, unit, cells[1], number, cells[0], row, paths, extra, problems)
        elif table == "stats" and len(cells) != len(header):
            problems.append(f"line {number} has {len(cells)} cells, its header {len(header)}")
        elif table == "stats":
            _csv_stats(metric, unit, cells, stats, number, release, row, paths, extra, problems)
    if not seen_rate:
        problems.append("no Request Throughput row (the file is cut short)")
    if problems:
        result.errors.append(ParseError(1, f"{pid}: {', '.join(problems)}; the point is left out"))
        return result
    if release == "0.0.1":
        extra["format"] = "genai-perf 0.0.1 summary CSV (ns)"
    elif release == "0.0.15+":
        extra["format"] = "genai-perf 0.0.15+ summary CSV (ms)"
    else:
        extra["format"] = (f"genai-perf {'0.0.2-0.0.3' if ns_rows else '0.0.4-0.0.14'} summary CSV "
                           f"({'ns' if ns_rows else 'ms'})")
    if ns_rows and release != "0.0.1" and "itl_figures_ms" in extra:
        extra["itl_left_out"] = ("a CSV in ns is written by 0.0.2 (inter_token_latency over every "
                                 "response gap) or 0.0.3 (per request, a TPOT): not told apart")
    row.update(_common_fields(extra, paths))
    result.points.append(row)
    return result


def _cell(value: str) -> tuple[float | None, str | None]:
    """A CSV cell as a number: (value, None), (None, None) where the tool wrote none (`N/A`, or
    0.0.1 – 0.0.3's -1 for a figure it did not have), (None, what it is) otherwise."""
    if value in ("", "N/A"):
        return None, None
    try:
        number = float(value.replace(",", ""))
    except ValueError:
        return None, "a string"
    if not math.isfinite(number):
        return None, "NaN" if math.isnan(number) else "infinite"
    return number, None


def _cell_path(line: int, label: str, stat: str) -> str:
    return f"line {line} {json.dumps(label)} {stat}"


def _csv_stats(metric: str, unit: str, cells: list[str], stats: tuple[str, ...], line: int,
               release: str, row: dict, paths: dict, extra: dict, problems: list[str]) -> None:
    if metric == "time_to_first_token":
        columns = _TTFT
    elif metric == "request_latency":
        columns = _E2EL
    elif metric == "inter_token_latency":
        columns = _ITL if release == "0.0.1" else _TPOT if unit != "ns" else None
    else:
        columns = None
    values = dict(zip(stats, cells[1:]))
    if columns is None:
        figures = {}
        for stat in ("avg", "p50"):
            number, _ = _cell(values.get(stat, ""))
            if number is not None and number >= 0:
                figures[stat] = number
        if metric == "inter_token_latency" and figures:
            extra["itl_figures_ms"] = {k: _ms(v, "ns") for k, v in figures.items()}
        key = {"output_sequence_length": "mean_output_tokens", "num_output_token": "mean_output_tokens",
               "input_sequence_length": "mean_input_tokens", "num_input_token": "mean_input_tokens",
               "time_to_second_token": "mean_ttst_ms"}.get(metric)
        if key and "avg" in figures:
            extra[key] = figures["avg"]
        return
    for stat, column in columns.items():
        number, problem = _cell(values.get(stat, ""))
        if problem:
            problems.append(f"{_cell_path(line, cells[0], stat)} is {problem} where a number belongs")
            continue
        if number is None or (unit == "ns" and number < 0):
            continue
        try:
            row[column] = _ms(number, unit)
        except ValueError:
            problems.append(f"line {line} {json.dumps(cells[0])} is in {unit!r}, not a unit of time")
            return
        paths[column] = _cell_path(line, cells[0], stat)


def _csv_value(metric: str, unit: str, value: str, line: int, label: str, row: dict, paths: dict,
               extra: dict, problems: list[str]) -> None:
    column = {"request_throughput": "request_throughput",
              "output_token_throughput": "output_throughput", "request_count": "completed"}.get(metric)
    number, problem = _cell(value)
    if column is None:
        if number is not None and metric == "request_goodput":
            extra["request_goodput"] = number
        return
    if problem:
        problems.append(f"{_cell_path(line, label, 'Value')} is {problem} where a number belongs")
        return
    if number is None or number < 0:
        return
    if column == "completed":
        if number != int(number):
            problems.append(f"{_cell_path(line, label, 'Value')} is {value}, not a whole count")
            return
        number = int(number)
    elif unit not in _RATE_UNITS[metric]:
        problems.append(f"line {line} {json.dumps(label)} is in {unit!r}, not a rate it is known by")
        return
    row[column] = number
    paths[column] = _cell_path(line, label, "Value")


# ---------------------------------------------------------------- perf_analyzer's export

def _parse_export(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    result = BenchParse()
    text = decode(data)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        result.errors.append(ParseError(exc.lineno, f"not valid JSON: {exc.msg} (line {exc.lineno} "
                                                    f"column {exc.colno}); no request read"))
        return result
    line = _first_line(text)
    experiments = obj.get("experiments") if isinstance(obj, dict) else None
    if not isinstance(experiments, list):
        result.errors.append(ParseError(line, "perf_analyzer export without an experiments list; "
                                              "no request read"))
        return result
    service_kind = obj.get("service_kind")
    openai = service_kind == "openai"
    # The point the requests belong to is the one the summary beside them names: from the JSON,
    # with its concurrency; from the CSV alone, which states none, by its position.
    stem = PurePosixPath(_plain(name)).name.partition(".")[0]
    beside = _base_names(siblings)
    by_position = (f"{stem}{SUMMARY_SUFFIX}.json" not in beside
                   and f"{stem}{SUMMARY_SUFFIX}.csv" in beside)
    for k, experiment in enumerate(experiments):
        where = common.path("experiments", k)
        if not isinstance(experiment, dict) or not isinstance(experiment.get("requests"), list):
            result.errors.append(ParseError(line, f"{where} has no requests list; left out"))
            continue
        mode = _get(experiment, ("experiment", "mode"))
        concurrency = _whole(_get(experiment, ("experiment", "value"))) if mode == "concurrency" else None
        pid = common.point_id(name, None if by_position else concurrency, k + 1)
        bad = 0
        for i, record in enumerate(experiment["requests"]):
            row = _request_row(record, openai)
            if row is None:
                bad += 1
                row = {"error": "not a request record"}
            result.requests.append({
                "point_id": pid, "request_idx": i, "input_tokens": None, "output_tokens": None,
                "ttft_s": None, "latency_s": None, "itl_count": None, "itl_sum_s": None,
                "start_time_s": None, "error": None, "tpot_ms": None, "field_paths": None,
                **row, "record_path": common.path("experiments", k, "requests", i),
                "source_line": line})
        if bad:
            result.errors.append(ParseError(line, f"{pid}: {bad} record(s) of {where}.requests are "
                                                  "not request objects; their rows hold no figures"))
    return result


def _request_row(record: Any, openai: bool) -> dict[str, Any] | None:
    """One request's columns (and field_paths), read as genai-perf reads it."""
    if not isinstance(record, dict):
        return None
    row: dict[str, Any] = {}
    fields: dict[str, str] = {}
    start = record.get("timestamp")
    start_ok = isinstance(start, int) and not isinstance(start, bool)
    if start_ok:
        row["start_time_s"] = start / 1e9
        fields["start_time_s"] = "timestamp"
    stamps = record.get("response_timestamps")
    outputs = record.get("response_outputs")
    if not isinstance(stamps, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                               for t in stamps):
        row["error"] = "response_timestamps is not a list of integers"
        row["field_paths"] = common.paths_json(fields)
        return row
    if not stamps:
        row["error"] = "no response"
        row["field_paths"] = common.paths_json(fields)
        return row
    kept = list(range(len(stamps)))
    error = None
    if openai:
        if not isinstance(outputs, list) or len(outputs) != len(stamps):
            row["error"] = "response_outputs and response_timestamps differ in length"
            row["field_paths"] = common.paths_json(fields)
            return row
        texts, error = zip(*(_openai_text(o) for o in outputs)) if outputs else ((), ())
        error = next((e for e in error if e), None)
        kept = [j for j, has_text in enumerate(texts) if has_text]
        usage = _usage(outputs)
        if usage:
            for column, (j, key, value) in usage.items():
                row[column] = value
                fields[column] = f"{common.path('response_outputs', j, 'response')} usage.{key}"
    if error:
        row["error"] = error
    elif not kept:
        row["error"] = "no response with text"
    if kept and start_ok:
        first, last = kept[0], kept[-1]
        row["latency_s"] = (stamps[last] - start) / 1e9
        fields["latency_s"] = f"{common.path('response_timestamps', last)} - timestamp"
        if _streamed(record.get("request_inputs"), openai):
            row["ttft_s"] = (stamps[first] - start) / 1e9
            fields["ttft_s"] = f"{common.path('response_timestamps', first)} - timestamp"
    row["field_paths"] = common.paths_json(fields)
    return row


def _streamed(inputs: Any, openai: bool) -> bool:
    """Whether the request asked for a streamed answer: `"stream": true` in its OpenAI payload,
    or a `stream` input of true (Triton). Without it, the first response is the whole answer."""
    if not isinstance(inputs, dict):
        return False
    if openai:
        payload = inputs.get("payload")
        if isinstance(payload, str):
            try:
                payload = json.loads(payload)
            except json.JSONDecodeError:
                return False
        return isinstance(payload, dict) and payload.get("stream") is True
    stream = inputs.get("stream")
    return stream is True or stream == [True]


def _events(output: Any) -> list[str]:
    response = output.get("response") if isinstance(output, dict) else None
    if not isinstance(response, str):
        return []
    return [e.strip() for e in response.strip().split("\n\n") if e.strip()]


def _event_json(event: str) -> Any:
    if event.startswith((":", "event:", "id:", "retry:")):
        return None
    body = event[len("data:"):].strip() if event.startswith("data:") else event
    if not body or body == "[DONE]":
        return None
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        return None


def _openai_text(output: Any) -> tuple[bool, str | None]:
    """(whether the response carries text, the error event it holds), as genai-perf's
    llm_profile_data_parser decides it: SSE events split on blank lines, comments and non-data
    events ignored, `[DONE]` empty, the text of chat.completion (message.content),
    chat.completion.chunk (delta.content), text_completion or no object (text), generate
    (text_output) and Hugging Face (generated_text) answers."""
    has_text = False
    for event in _events(output):
        if event.startswith("event:") and "error" in event.lower():
            return False, f"error event: {event[:200]}"
        has_text = has_text or bool(_text_of(_event_json(event)))
    return has_text, None


def _text_of(data: Any) -> str:
    if isinstance(data, list):
        first = data[0] if data else None
        return str(first.get("generated_text") or "") if isinstance(first, dict) else ""
    if not isinstance(data, dict):
        return ""
    if "text_output" in data:
        return str(data.get("text_output") or "")
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    kind = data.get("object")
    if kind == "chat.completion":
        message = choice.get("message")
        return str(message.get("content") or "") if isinstance(message, dict) else ""
    if kind == "chat.completion.chunk":
        delta = choice.get("delta")
        return str(delta.get("content") or "") if isinstance(delta, dict) else ""
    return str(choice.get("text") or "")


def _usage(outputs: list) -> dict[str, tuple[int, str, int]]:
    """The server's token counts where a response carries `usage` (the last one that does)."""
    for j in range(len(outputs) - 1, -1, -1):
        for event in reversed(_events(outputs[j])):
            data = _event_json(event)
            usage = data.get("usage") if isinstance(data, dict) else None
            if not isinstance(usage, dict):
                continue
            found = {}
            for column, key in (("output_tokens", "completion_tokens"), ("input_tokens", "prompt_tokens")):
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    found[column] = (j, key, value)
            if found:
                return found
    return {}

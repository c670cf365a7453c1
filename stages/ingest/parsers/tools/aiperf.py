"""NVIDIA AIPerf (the successor of GenAI-Perf) result files, in every shape its releases write:

* `profile_export_aiperf.json`, the summary of one run: one object per metric (`unit`, `avg`,
  `min`, `max`, `p1` ... `p99`, `std`; by 0.10.0 also `count` and `sum`) and the run's
  settings (`input_config`). Releases 0.1.x nest the metrics under `records`, keyed by tag, each
  also naming its `tag` and `header`, time to first token being `ttft`; from 0.2.0 each metric is a
  top-level key (the GenAI-Perf layout), time to first token being `time_to_first_token`; from
  0.4.0 `schema_version`, `aiperf_version` and `benchmark_id` lead the file. The load is
  `input_config.loadgen` (`concurrency`, `request_rate`, ...) through 0.5.0, and by 0.8.0
  `input_config.phases` (a `warmup` phase excluded from the results, and a `profiling` one).
* `profile_export_aiperf.csv`, the same summary rounded to two decimals: a table `Metric,avg,
  min,max,[sum,]p1,...` (one row per metric with percentiles, named `Header (unit)`), a blank line,
  then `Metric,Value` (the single figures), then GPU telemetry. Read only where the JSON is not
  beside it; it says nothing of the settings (model, concurrency).
* `profile_export.jsonl` (0.2.0 on), one JSON line per request of the profiling phase:
  `metadata` (`session_num`, `request_start_ns`, `request_end_ns` as epoch nanoseconds,
  `benchmark_phase`, `was_cancelled`, ...), `metrics` (each `{"value", "unit"}`, in display units)
  and `error` (`{"code", "type", "message"}`; null when it succeeded, absent by 0.10.0). Before
  0.2.0 the main branch wrote `timestamp_ns` and `credit_phase` instead, and the summary's tags.

What the figures are: `request_count` counts the requests that succeeded, `error_request_count`
those that failed (cancelled ones included; absent where none failed), so the requests sent are
their sum. `inter_token_latency` is each request's (latency - TTFT) / (output tokens - 1), the
time per output token (TPOT) of vLLM's tool; `inter_chunk_latency` pools the gaps between
streamed chunks, the ITL. `output_sequence_length` (`total_osl`) counts reasoning tokens too, and
`output_token_throughput` is `total_osl` over `benchmark_duration`; `total_output_tokens` leaves
the reasoning tokens out in the 0.1.x layout, so it is not read. Units are read from the file:
ms and sec for times, ns for timestamps, tokens/sec and requests/sec for rates.

The point: AIPerf names its files the same for every run (or `<prefix>.json`, `<prefix>.jsonl`
with --profile-export-prefix), so the point id comes from the file's stem where that names a point
(`<workload>__c<NN>`), else from its folder's name where that does, else from the summary's stem
and the concurrency: the summary states it in its settings; the per-request file and the CSV only
through the folder AIPerf names by default (`<model>-openai-chat-concurrency<N>`). The request
file is named by its summary's stem (`profile_export.jsonl` -> `profile_export_aiperf`), so both
meet in one point.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import PurePosixPath
from typing import Any

from stages.ingest.parsers.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError

TOOL = "aiperf"

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
# CSV row headers (without their unit) -> metric tag.
_CSV_HEADERS = {
    "Time to First Token": "time_to_first_token", "Inter Token Latency": "inter_token_latency",
    "Inter Chunk Latency": "inter_chunk_latency", "Request Latency": "request_latency",
    "Benchmark Duration": "benchmark_duration", "Request Throughput": "request_throughput",
    "Output Token Throughput": "output_token_throughput",
    "Total Token Throughput": "total_token_throughput", "Request Count": "request_count",
    "Error Request Count": "error_request_count", "Total Input Sequence Length": "total_isl",
    "Total Output Sequence Length": "total_osl", "Benchmark Token Count": "benchmark_token_count",
}
# The CSV exporter leaves these units out of a row's name.
_CSV_UNITLESS = {"request_count": "requests", "error_request_count": "requests"}
_CSV_HEAD = re.compile(rb"^\s*Metric,avg,min,max,(?:sum,)?p1,p5,")
_CSV_ROW_NAME = re.compile(r"^(?P<header>.*?)(?: \((?P<unit>[^()]*)\))?$")
# AIPerf's own artifact folder name: <model>-<service>-<endpoint>-concurrency<N>[-request_rate<R>]
_FOLDER_CONCURRENCY = re.compile(r"-concurrency(\d+)(?:-|$)")
_SUMMARY_MARKS = (b'"aiperf_version"', b'"cli_command": "aiperf')
_RECORD_MARKS = (b'"record_processor_id"', b'"benchmark_phase"', b'"credit_phase"')
_MAX_JSON_BYTES = 64 << 20
_MAX_LINE_ERRORS = 10

# Per-request figures: column -> (metric tags, first found wins; kind).
_REQUEST_FIGURES = {
    "input_tokens": (("input_sequence_length", "error_isl"), "tokens"),
    "output_tokens": (("output_sequence_length",), "tokens"),
    "ttft_s": (("time_to_first_token", "ttft"), "seconds"),
    "latency_s": (("request_latency",), "seconds"),
    "tpot_ms": (("inter_token_latency",), "millis"),
}


# --------------------------------------------------------------------------------------------
# Recognising


def recognise(name: str, data: bytes) -> bool:
    """An AIPerf summary (JSON or CSV) or per-request JSON-lines file, by its content: a summary
    with AIPerf's settings (`input_config` with `loadgen`, `phases`, `models.items` or an
    `aiperf` command line, or `aiperf_version`) beside its metric objects; a JSON line with the
    `metadata` (record processor, benchmark phase) and `metrics` of a request record; the CSV's
    header row, whose percentiles run upwards from p1 (GenAI-Perf's run down from p99). A file cut
    short is recognised by those keys in its text, so that parse can say what is wrong."""
    del name  # by content alone
    head = data[:65536].lstrip()
    if _CSV_HEAD.match(head):
        return True
    if not head.startswith(b"{"):
        return False
    first = head.split(b"\n", 1)[0]
    record = _json_object(first)
    if record is not None:
        if _is_record(record):
            return True
        if _is_summary(record):  # a summary written on one line
            return True
    elif first.startswith(b'{"metadata"') and any(mark in first for mark in _RECORD_MARKS):
        return True
    if len(data) <= _MAX_JSON_BYTES and (data.find(b'"input_config"') != -1
                                         or data.find(b'"records"') != -1):
        whole = _json_object(data)
        if whole is not None:
            return _is_summary(whole)
    return (any(mark in head for mark in _SUMMARY_MARKS)
            or (b'"input_config"' in head and (b'"loadgen"' in head or b'"phases"' in head))
            or (head.startswith(b'{\n  "records": {') and b'"tag"' in head and b'"header"' in head))


def _json_object(raw: bytes) -> dict | None:
    try:
        obj = json.loads(decode(raw))
    except (json.JSONDecodeError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _is_record(obj: dict) -> bool:
    meta = obj.get("metadata")
    return (isinstance(meta, dict) and "metrics" in obj
            and ("record_processor_id" in meta or "worker_id" in meta)
            and ("benchmark_phase" in meta or "credit_phase" in meta))


def _is_summary(obj: dict) -> bool:
    config = obj.get("input_config")
    if not isinstance(config, dict):
        return False
    records = obj.get("records")
    tagged = isinstance(records, dict) and any(
        isinstance(v, dict) and {"tag", "header", "unit"} <= v.keys() for v in records.values())
    metrics = tagged or any(isinstance(v, dict) and "unit" in v and "avg" in v for v in obj.values())
    aiperf = (tagged or "aiperf_version" in obj or "loadgen" in config or "phases" in config
              or isinstance(config.get("models"), dict)
              or str(_cli_command(obj) or "").startswith("aiperf"))
    return metrics and aiperf


# --------------------------------------------------------------------------------------------
# Parsing


def parse(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """The point (summary) or the requests (JSON lines) of one AIPerf file; errors, never an
    exception, for a file that is cut short, damaged, or holds something other than a number
    where a figure belongs."""
    try:
        head = data[:65536].lstrip()
        if _CSV_HEAD.match(head):
            return _parse_csv(name, data, siblings)
        first = head.split(b"\n", 1)[0]
        record = _json_object(first)
        if (record is not None and _is_record(record)) or (
                record is None and first.startswith(b'{"metadata"')):
            return _parse_records(name, data, siblings)
        return _parse_summary(name, data)
    except Exception as exc:  # noqa: BLE001 - a file must give errors, never stop ingest
        return BenchParse(errors=[ParseError(1, f"AIPerf file not read: {type(exc).__name__}: {exc}")])


def _plain_path(name: str) -> PurePosixPath:
    return PurePosixPath(name[:-3] if name.endswith(".gz") else name)


def _stem(path: PurePosixPath) -> str:
    return path.name.split(".", 1)[0]


def _names_point(stem: str) -> bool:
    return common.split_point_id(stem)[0] is not None


def _point_name(name: str, summary_stem: str | None = None) -> str:
    """The name whose stem names this file's point: the file's own where its stem names a point,
    else its folder's where that does, else the summary's (a per-request file's summary stem)."""
    path = _plain_path(name)
    if _names_point(_stem(path)):
        return name
    folder = path.parent.name
    if folder and _names_point(folder):
        return f"{folder}.json"
    if summary_stem is not None:
        return str(path.with_name(f"{summary_stem}.json"))
    return name


def _folder_concurrency(name: str) -> int | None:
    """The concurrency AIPerf's default artifact folder name states (`...-concurrency8`)."""
    match = _FOLDER_CONCURRENCY.search(_plain_path(name).parent.name)
    return int(match.group(1)) if match else None


def _summary_stem(name: str) -> str:
    """The stem of the summary written beside per-request file `name`: profile_export.jsonl sits
    beside profile_export_aiperf.json; with --profile-export-prefix P, P.jsonl beside P.json."""
    stem = _stem(_plain_path(name))
    return "profile_export_aiperf" if stem == "profile_export" else stem


def _beside(name: str, siblings: frozenset[str], filename: str) -> bool:
    """Whether `filename` (or its .gz) is among the siblings of file `name`, whether siblings
    are given as bare names or as paths in the run folder."""
    folder = _plain_path(name).parent
    for sibling in siblings:
        path = _plain_path(sibling)
        if path.name == filename and (len(path.parts) == 1 or path.parent == folder):
            return True
    return False


# Summary sources: JSON (either layout) and CSV give a metric's unit, its statistics and where
# each statistic stands in the file.


class _Metric:
    __slots__ = ("unit", "stats", "where")

    def __init__(self, unit: Any, stats: dict[str, Any], where):
        self.unit, self.stats, self.where = unit, stats, where


def _json_metrics(obj: dict) -> dict[str, _Metric]:
    """tag -> metric of a JSON summary, in the 0.1.x `records` layout or the top-level one."""
    out: dict[str, _Metric] = {}
    records = obj.get("records")
    nested = isinstance(records, dict)
    source = records if nested else obj
    for tag, block in source.items():
        if not isinstance(block, dict) or "unit" not in block:
            continue
        prefix = ("records", tag) if nested else (tag,)
        out[tag] = _Metric(block.get("unit"), block,
                           lambda stat, prefix=prefix: common.path(*prefix, stat))
    return out


def _figures(metrics: dict[str, _Metric]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(figures in the columns' units, where each came from, what is wrong) of a summary."""
    row: dict[str, Any] = {}
    paths: dict[str, str] = {}
    problems: list[str] = []

    def pick(tags: tuple[str, ...]) -> tuple[str, _Metric] | None:
        return next(((t, metrics[t]) for t in tags if t in metrics), None)

    for column, (tags, stat) in _TIME_FIGURES.items():
        found = pick(tags)
        if found is None or found[1].stats.get(stat) is None:
            continue
        metric = found[1]
        value, where = metric.stats[stat], metric.where(stat)
        problem = _not_finite(value)
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
            problem = _not_finite(value)
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


def _not_finite(value: Any) -> str | None:
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


def _parse_summary(name: str, data: bytes) -> BenchParse:
    result = BenchParse()
    text = decode(data)
    if not text.strip():
        result.errors.append(ParseError(1, "empty AIPerf summary file"))
        return result
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        result.errors.append(ParseError(exc.lineno, f"AIPerf summary is not valid JSON: {exc.msg} "
                                                    f"(line {exc.lineno} column {exc.colno}); no point read"))
        return result
    if not isinstance(obj, dict) or not _is_summary(obj):
        result.errors.append(ParseError(1, "not an AIPerf summary (no input_config beside metric "
                                           "objects); no point read"))
        return result
    first = len(text) - len(text.lstrip())
    line = text.count("\n", 0, first) + 1
    settings = _settings(obj)
    concurrency = settings.pop("concurrency", None)
    pid = common.point_id(_point_name(name), concurrency if concurrency is not None
                          else _folder_concurrency(name))
    row, paths, problems = _figures(_json_metrics(obj))
    if problems:
        result.errors.append(ParseError(line, f"{pid}: {', '.join(problems)} where a number belongs; "
                                              "the point is left out"))
        return result
    if row.get("completed") is not None and "failed" not in row:
        failed, where = _failed_from_errors(obj.get("error_summary"))
        if failed is not None:
            row["failed"] = failed
            settings["failed_from"] = where
    _complete_sent(row, settings)
    point = _point_row(pid, line, row, paths, settings, concurrency)
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


def _point_row(pid: str, line: int, row: dict, paths: dict, settings: dict,
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


def _complete_sent(row: dict, settings: dict) -> None:
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
        if _not_finite(count) is not None or int(count) != count or count < 0:
            return None, None
        total += int(count)
    return total, "error_summary[*].count"


def _cli_command(obj: dict) -> Any:
    config = obj.get("input_config") if isinstance(obj.get("input_config"), dict) else {}
    artifacts = config.get("artifacts") if isinstance(config.get("artifacts"), dict) else {}
    run_info = obj.get("run_info") if isinstance(obj.get("run_info"), dict) else {}
    return config.get("cli_command") or artifacts.get("cli_command") or run_info.get("cli_command")


def _whole(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value) if value == int(value) and value > 0 else None


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
        concurrency = _whole(loadgen.get("concurrency"))
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
            concurrency = _whole(phase.get("concurrency"))
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
    cli = _cli_command(obj)
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


# --------------------------------------------------------------------------------------------
# The CSV export


def _parse_csv(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """The summary's CSV: read only where its JSON is not beside it (one point, never two)."""
    result = BenchParse()
    path = _plain_path(name)
    if _beside(name, siblings, f"{_stem(path)}.json"):
        return result
    metrics: dict[str, _Metric] = {}
    header: list[str] | None = None
    for line_no, raw in enumerate(decode(data).splitlines(), start=1):
        if not raw.strip():
            header = None
            continue
        cells = next(csv.reader(io.StringIO(raw)))
        if header is None:
            header = cells if cells and cells[0] == "Metric" else []
            continue
        if not header or len(cells) != len(header):
            if header:
                result.errors.append(ParseError(line_no, f"AIPerf CSV row has {len(cells)} cells, "
                                                         f"its table {len(header)}; row not read"))
            continue
        match = _CSV_ROW_NAME.match(cells[0])
        tag = _CSV_HEADERS.get(match.group("header")) if match else None
        if tag is None:
            continue
        unit = match.group("unit") or _CSV_UNITLESS.get(tag)
        columns = ["avg"] if header[1:] == ["Value"] else header[1:]
        stats = {col: _csv_number(cell) for col, cell in zip(columns, cells[1:])}
        metrics[tag] = _Metric(unit, stats, lambda stat, n=line_no, h=header: (
            f"line {n}, column {'Value' if h[1:] == ['Value'] else stat}"))
    if not metrics:
        result.errors.append(ParseError(1, "AIPerf CSV holds none of the figures ingest reads; "
                                           "no point read"))
        return result
    concurrency = _folder_concurrency(name)
    pid = common.point_id(_point_name(name), concurrency)
    row, paths, problems = _figures(metrics)
    if problems:
        result.errors.append(ParseError(1, f"{pid}: {', '.join(problems)} where a number belongs; "
                                           "the point is left out"))
        return result
    settings: dict[str, Any] = {"figures_rounded": "the CSV export's two decimals"}
    _complete_sent(row, settings)
    point = _point_row(pid, 1, row, paths, settings, concurrency)
    point["max_concurrency"] = None
    point["metadata_json"] = json.dumps(settings, sort_keys=True)
    result.points.append(point)
    return result


def _csv_number(cell: str) -> Any:
    """A CSV cell as a number (NaN and inf as floats, to be caught), None when empty, else the
    text itself (caught as a string where a number belongs)."""
    cell = cell.strip()
    if not cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return cell


# --------------------------------------------------------------------------------------------
# Per-request records (profile_export.jsonl)


def _summary_point(name: str, summary_stem: str, siblings: frozenset[str]) -> str | None:
    """The point id of the summary JSON beside per-request file `name`, read through
    `siblings` (common.Siblings); None where there is none or it gives no one point."""
    read = getattr(siblings, "read", None)
    path = str(_plain_path(name).with_name(f"{summary_stem}.json"))
    data = None
    for candidate in (path, path + ".gz"):
        data = read(candidate) if read is not None else None
        if data is not None:
            path = candidate
            break
    if data is None:
        return None
    points = _parse_summary(path, data).points
    return points[0]["point_id"] if len(points) == 1 else None


def _parse_records(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """One request row per JSON line of the profiling phase, in file order. Like vLLM's arrays,
    the requests are all or nothing: a line that is not a record, or a figure that is not a finite
    number, leaves every request of the file out, with an error naming each such line."""
    result = BenchParse()
    summary_stem = _summary_stem(name)
    point_name = _point_name(name, summary_stem)
    concurrency = _folder_concurrency(name)
    pid = common.point_id(point_name, concurrency)
    from_summary = _summary_point(name, summary_stem, siblings)
    if from_summary is not None:
        pid = from_summary
    elif (concurrency is None and not _names_point(_stem(_plain_path(point_name)))
            and _beside(name, siblings, f"{summary_stem}.json")):
        result.errors.append(ParseError(1, f"{pid}: the point's concurrency is stated only inside "
                                           f"{summary_stem}.json, which no name here repeats (the "
                                           "file's, its folder's); the requests meet that summary's "
                                           "point only where it states no concurrency"))
    rows: list[dict[str, Any]] = []
    bad: list[ParseError] = []
    text = decode(data)
    for line_no, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            bad.append(ParseError(line_no, f"not valid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if not isinstance(obj, dict) or not _is_record(obj):
            bad.append(ParseError(line_no, "not an AIPerf request record (metadata and metrics)"))
            continue
        meta = obj["metadata"]
        phase = meta.get("benchmark_phase", meta.get("credit_phase"))
        if phase not in (None, "profiling"):
            continue  # a warm-up request is no part of the point
        row, problems = _request_row(obj, len(rows), line_no, pid)
        if problems:
            bad.extend(ParseError(line_no, p) for p in problems)
            continue
        rows.append(row)
    if bad:
        shown = bad[:_MAX_LINE_ERRORS]
        result.errors.extend(shown)
        more = f" ({len(bad) - len(shown)} more problems not listed)" if len(bad) > len(shown) else ""
        result.errors.append(ParseError(shown[0].line, f"{pid}: {len(bad)} problem(s) in the request "
                                                       f"records{more}; its requests are left out"))
        return result
    if not rows:
        result.errors.append(ParseError(1, f"{pid}: no request record of the profiling phase"))
    result.requests.extend(rows)
    return result


def _request_row(obj: dict, idx: int, line: int, pid: str) -> tuple[dict[str, Any], list[str]]:
    metrics = obj.get("metrics") if isinstance(obj.get("metrics"), dict) else {}
    meta = obj["metadata"]
    row: dict[str, Any] = {"point_id": pid, "request_idx": idx, "source_line": line,
                           "record_path": None, "input_tokens": None, "output_tokens": None,
                           "ttft_s": None, "latency_s": None, "tpot_ms": None, "itl_count": None,
                           "itl_sum_s": None, "start_time_s": None}
    fields: dict[str, str] = {}
    problems: list[str] = []
    for column, (tags, kind) in _REQUEST_FIGURES.items():
        tag = next((t for t in tags if isinstance(metrics.get(t), dict)), None)
        if tag is None or metrics[tag].get("value") is None:
            continue
        where = common.path("metrics", tag, "value")
        value, unit = metrics[tag]["value"], str(metrics[tag].get("unit", ""))
        problem = _not_finite(value)
        if problem is None and kind == "tokens" and (unit != "tokens" or value != int(value)):
            problem = f"not a whole number of tokens (unit {unit!r})"
        if problem is None and kind != "tokens" and unit.strip().lower() not in common.SECONDS:
            problem = f"in unknown unit {unit!r}"
        if problem:
            problems.append(f"{where} is {problem} where a number belongs")
            continue
        row[column] = (int(value) if kind == "tokens" else common.seconds(value, unit)
                       if kind == "seconds" else common.millis(value, unit))
        fields[column] = where
    gaps = metrics.get("inter_chunk_latency")
    if isinstance(gaps, dict) and gaps.get("value") is not None:
        where = common.path("metrics", "inter_chunk_latency", "value")
        values, unit = gaps["value"], str(gaps.get("unit", ""))
        if not isinstance(values, list):
            problems.append(f"{where} is {_not_finite(values) or 'a number'}, not a list")
        elif any(_not_finite(v) for v in values):
            problems.append(f"{where} holds something other than a finite number")
        elif unit.strip().lower() not in common.SECONDS:
            problems.append(f"{where} is in unknown unit {unit!r}")
        else:
            row["itl_count"] = len(values)
            row["itl_sum_s"] = common.seconds(float(sum(values)), unit)
            fields["itl_count"] = fields["itl_sum_s"] = where
    for key in ("request_start_ns", "timestamp_ns"):
        start = meta.get(key)
        if start is None:
            continue
        if _not_finite(start):
            problems.append(f"metadata.{key} is {_not_finite(start)} where a number belongs")
        else:
            row["start_time_s"] = start / 1e9
            fields["start_time_s"] = common.path("metadata", key)
        break
    error = obj.get("error")
    if error is not None:
        row["error"] = _error_text(error)
        fields["error"] = "error"
    else:
        row["error"] = None
    row["field_paths"] = common.paths_json(fields)
    return row, [f"{pid}: {p}" for p in problems]


def _error_text(error: Any) -> str:
    """A request's error as AIPerf records it: `Type (code): message`."""
    if not isinstance(error, dict):
        return str(error)
    kind, code, message = error.get("type"), error.get("code"), error.get("message")
    text = str(kind) if kind is not None else "error"
    if code is not None:
        text += f" ({code})"
    return f"{text}: {message}" if message is not None else text

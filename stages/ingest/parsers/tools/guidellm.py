"""GuideLLM's benchmark reports (`guidellm benchmark`, github.com/vllm-project/guidellm, earlier
neuralmagic/guidellm): JSON, YAML or the CSV export, one point per benchmark (one per strategy run:
synchronous, concurrent at N streams, a constant or Poisson rate, throughput).

The shapes, by the release that writes them:
  0.1        {"benchmarks": [{"benchmarks": [{mode, rate, results, errors, concurrencies}], args}]}:
             no summary at all, each request's start and end times, its time to first token in
             seconds and the gaps between its tokens (decode_times.data, seconds).
  0.2 - 0.3  {"benchmarks": [{type_: generative_benchmark, args: {strategy}, run_stats, worker,
             metrics, request_totals, requests: {successful, errored, incomplete}, duration}]}.
  0.4        {"args", "benchmarks": [{config: {strategy}, scheduler_state, scheduler_metrics,
             metrics: {request_totals, ...}, requests, start_time, end_time, duration}]}.
  0.5 - 0.6  the same, after {"metadata": {version: 1, guidellm_version}}.
  0.7 on     the same benchmarks under {"metadata": {version: 2, ...}, "config": {spec}}.
  CSV        0.2 - 0.3: one header row ("Successful Time to first token ms median", ...);
             0.4 on: three header rows (group, status and unit, statistic); 0.5 on adds the
             report's metadata and arguments (Runtime Info) to each row.
YAML is the JSON's content as yaml.dump writes it (keys sorted). The JSON is one object on one
line: a point's source_line is the line its benchmark starts on (1), a YAML's is its own line.
A point's id is common.point_id of the file, the strategy's concurrency and the benchmark's
position (from 1); times are epoch seconds as the tool writes them (start_time_s too).

Each metric is a distribution per status; the point takes the successful requests' one, as the
tool's own console table does: time_to_first_token_ms (ms), inter_token_latency_ms (ms; each
request's (last token - first token) / (output tokens - 1), the project's time per output token,
the tool weighting each request by its output tokens - 1), request_latency (seconds),
requests_per_second, output_tokens_per_second and tokens_per_second (the tool's rates over the
benchmark's time; their mean is what it prints as throughput), prompt_token_count and
output_token_count (total_sum: the tokens of all successful requests). The tool's own
time_per_output_token_ms (divided by all output tokens, and from 0.4 on counting the time to the
first token) is another figure than the project's TPOT: it is kept in metadata_json only.
request_totals counts the requests of the benchmark: num_prompts = total, completed = successful,
failed = errored (incomplete ones, cut off when the benchmark ended, are counted in num_prompts
and in metadata_json).

Per-request rows come from requests.successful / errored / incomplete, in the file's order
(a YAML's sorted keys put errored first), only when they are the requests the summary counts:
from 0.4 on the lists also hold the warm-up and cool-down requests, which the tool leaves out of
its summary by its own rule (a request counts when it ended after scheduler_metrics'
measure_start_time and started before its measure_end_time): the same rule leaves them out here.
A report saved with --output-sampling / --sample-requests keeps its points on the tool's
summary, with an error saying its requests are left out. A request's TTFT, latency and tpot_ms
(its inter_token_latency_ms; none for a request of fewer than two output tokens) are the tool's
own; 0.1's latency is its end_time - start_time, its token gaps itl_count / itl_sum_s.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import PurePosixPath
from typing import Any, Callable, Iterable

import yaml

from stages.ingest.parsers.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError

TOOL = "guidellm"

_HEAD = 256 * 1024
_STATUSES = ("successful", "errored", "incomplete")

# --- recognising -------------------------------------------------------------------------------

_JSON_V2 = re.compile(r'"benchmarks"\s*:\s*\[\s*\{\s*"type_"\s*:\s*"generative_benchmark"')
_JSON_V4 = re.compile(r'^\{\s*"metadata"\s*:\s*\{[^{}]*"guidellm_version"\s*:')
_JSON_V1 = re.compile(r'^\{\s*"benchmarks"\s*:\s*\[\s*\{\s*"benchmarks"\s*:\s*\[\s*\{\s*"mode"\s*:\s*'
                      r'"(?:synchronous|asynchronous|throughput)"\s*,\s*"rate"\s*:')
_YAML_START = re.compile(r"^(?:---\s*\n)?(?:benchmarks|metadata|args|config):[ \t]*\n")
_YAML_MARKS = (re.compile(r"^\s*-?\s*type_: generative_benchmark\s*$", re.M),
               re.compile(r"^\s*guidellm_version: ", re.M))
_YAML_V1_MARKS = (re.compile(r"^\s*-?\s*decode_times:\s*$", re.M),
                  re.compile(r"^\s*-?\s*first_token_set: (?:true|false)\s*$", re.M),
                  re.compile(r"^\s*-?\s*mode: (?:synchronous|asynchronous|throughput)\s*$", re.M))
_CSV_V2_HEAD = "Type,Run Id,Id,Name,Start Time,End Time,Duration,Successful Requests,"
_CSV_V4_HEAD = ("Run Info,Run Info,", "Run ID,Run Index,")


def recognise(name: str, data: bytes) -> bool:
    """A GuideLLM report, by its content: its JSON opens with the `guidellm_version` metadata
    (0.5 on) or 0.1's nested benchmarks of a mode, or holds a list of benchmarks of type
    `generative_benchmark` in its head (0.2 - 0.4); its YAML holds those at its head or tail
    (yaml.dump sorts keys, so they may come last); its CSV opens with the exporter's header rows."""
    head = decode(data[:_HEAD]).lstrip("\ufeff")
    text = head.lstrip()
    if text.startswith("{"):
        return bool(_JSON_V4.match(text) or _JSON_V1.match(text) or _JSON_V2.search(text))
    if _csv_kind(head):
        return True
    if _YAML_START.match(head):
        ends = head if len(data) <= _HEAD else head + "\n" + decode(data[-_HEAD:])
        return (any(mark.search(ends) for mark in _YAML_MARKS)
                or all(mark.search(ends) for mark in _YAML_V1_MARKS))
    return False


def _csv_kind(head: str) -> str | None:
    lines = head.split("\n", 2)
    if lines[0].startswith(_CSV_V2_HEAD):
        return "v2"
    if len(lines) > 1 and lines[0].startswith(_CSV_V4_HEAD[0]) and lines[1].startswith(_CSV_V4_HEAD[1]):
        return "v4"
    return None


# --- reading the file --------------------------------------------------------------------------

class _Lines:
    """The line a JSON path starts on: the document's first line for JSON (one object on one
    line, as the tool writes it), each node's own line for YAML."""

    def __init__(self, first: int, root: Any = None):
        self.first = first
        self.root = root

    def at(self, *parts: str | int) -> int:
        node = self.root
        if node is None:
            return self.first
        for part in parts:
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                node = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
            else:
                node = None
            if node is None:
                return self.first
        return node.start_mark.line + 1


def _load(text: str) -> tuple[Any, _Lines | None, list[ParseError]]:
    """The document and where its parts start; or the error that stops it being read."""
    stripped = text.lstrip()
    first = text.count("\n", 0, len(text) - len(stripped)) + 1
    if not stripped:
        return None, None, [ParseError(1, "empty GuideLLM report")]
    if stripped.startswith("{"):
        try:
            return json.loads(stripped), _Lines(first), []
        except json.JSONDecodeError as exc:
            line = exc.lineno + first - 1
            return None, None, [ParseError(line, f"not valid JSON: {exc.msg} (line {line} column "
                                                 f"{exc.colno}); the report is not read")]
        except RecursionError:
            return None, None, [ParseError(first, "JSON nested too deep; the report is not read")]
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        doc = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else first
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, None, [ParseError(line, f"not valid YAML: {problem} (line {line}); "
                                             "the report is not read")]
    except (ValueError, TypeError, RecursionError) as exc:
        return None, None, [ParseError(first, f"not valid YAML: {exc}; the report is not read")]
    finally:
        loader.dispose()
    return doc, _Lines(first, node), []


# --- numbers -----------------------------------------------------------------------------------

def _what(value: Any) -> str:
    """What a value is, where a finite number belongs."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "NaN" if math.isnan(value) else "infinite"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _in_column_unit(number: float, column: str, unit: str | None) -> float:
    """A time in `unit` as the column wants it (milliseconds for *_ms, seconds for *_s)."""
    if unit is None or (unit, column[-3:]) == ("ms", "_ms") or (unit, column[-2:]) == ("s", "_s"):
        return number
    if column.endswith("_ms"):
        return common.millis(number, unit)
    if column.endswith("_s"):
        return common.seconds(number, unit)
    raise ValueError(f"{column} is not a time")


def _whole(number: float) -> int | None:
    """A count the tool summed as floats (1748.9999999999998 is its 1749), else None."""
    nearest = round(number)
    return int(nearest) if abs(number - nearest) <= 1e-9 * max(1.0, abs(number)) else None


def _dig(obj: Any, parts: Iterable[str | int]) -> Any:
    for part in parts:
        if isinstance(obj, dict) and isinstance(part, str):
            obj = obj.get(part)
        elif isinstance(obj, list) and isinstance(part, int) and -len(obj) <= part < len(obj):
            obj = obj[part]
        else:
            return None
    return obj


class _Figures:
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
            self.problems.append(f"{column} ({where}) is {_what(value)}")
            return
        if whole:
            count = _whole(number)
            if count is None:
                self.problems.append(f"{column} ({where}) is {value!r}, not a whole number")
                return
            self.values[column] = count
        else:
            self.values[column] = _in_column_unit(number, column, unit)
        self.paths[column] = where


# --- a point from one benchmark of the report --------------------------------------------------

# column -> (metric, statistic path, the tool's unit for a time, whole number)
_SUMMARY = (
    ("mean_ttft_ms", "time_to_first_token_ms", ("mean",), "ms", False),
    ("median_ttft_ms", "time_to_first_token_ms", ("median",), "ms", False),
    ("p90_ttft_ms", "time_to_first_token_ms", ("percentiles", "p90"), "ms", False),
    ("p99_ttft_ms", "time_to_first_token_ms", ("percentiles", "p99"), "ms", False),
    ("mean_tpot_ms", "inter_token_latency_ms", ("mean",), "ms", False),
    ("median_tpot_ms", "inter_token_latency_ms", ("median",), "ms", False),
    ("p90_tpot_ms", "inter_token_latency_ms", ("percentiles", "p90"), "ms", False),
    ("p99_tpot_ms", "inter_token_latency_ms", ("percentiles", "p99"), "ms", False),
    ("mean_e2el_ms", "request_latency", ("mean",), "s", False),
    ("median_e2el_ms", "request_latency", ("median",), "s", False),
    ("request_throughput", "requests_per_second", ("mean",), None, False),
    ("output_throughput", "output_tokens_per_second", ("mean",), None, False),
    ("total_token_throughput", "tokens_per_second", ("mean",), None, False),
    ("total_input_tokens", "prompt_token_count", ("total_sum",), None, True),
    ("total_output_tokens", "output_token_count", ("total_sum",), None, True),
)
_COUNTS = (("num_prompts", "total"), ("completed", "successful"), ("failed", "errored"))


def _strategy_settings(strategy: Any, figures: _Figures, where: tuple) -> tuple[str | None, int | None]:
    """(kind, concurrency) of a benchmark's scheduling strategy; its rate and its cap on requests
    in flight go to the figures. synchronous is one request at a time; concurrent runs `streams`;
    a rate (constant, poisson) or throughput has no set concurrency."""
    if not isinstance(strategy, dict):
        return None, None
    kind = strategy.get("type_")
    kind = kind if isinstance(kind, str) else None
    concurrency = None
    if kind == "synchronous":
        concurrency = 1
        figures.values["max_concurrency"] = 1
    elif kind == "concurrent":
        streams = strategy.get("streams")
        if isinstance(streams, int) and not isinstance(streams, bool) and streams > 0:
            concurrency = streams
            figures.take("max_concurrency", streams, common.path(*where, "streams"), whole=True)
    if kind in ("constant", "poisson"):
        figures.take("request_rate", strategy.get("rate"), common.path(*where, "rate"))
    if "max_concurrency" not in figures.values and kind != "synchronous":
        cap = strategy.get("max_concurrency")
        if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
            figures.take("max_concurrency", cap, common.path(*where, "max_concurrency"), whole=True)
    return kind, concurrency


class _Report:
    """The report's settings shared by its benchmarks (model, backend, version)."""

    def __init__(self, doc: dict[str, Any]):
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        self.version = meta.get("guidellm_version") if isinstance(meta.get("guidellm_version"), str) else None
        self.schema = meta.get("version")
        args = doc.get("args") if isinstance(doc.get("args"), dict) else {}
        spec = _dig(doc, ("config", "spec"))
        spec = spec if isinstance(spec, dict) else {}
        backend = spec.get("backend") if isinstance(spec.get("backend"), dict) else {}
        profile = spec.get("profile") if isinstance(spec.get("profile"), dict) else {}
        self.model = _text(args.get("model")) or _text(backend.get("model"))
        self.backend = _text(args.get("backend")) or _text(backend.get("kind"))
        self.target = _text(args.get("target")) or _text(backend.get("target"))
        self.profile = _text(args.get("profile")) or _text(profile.get("kind"))
        data = args.get("data") if args else spec.get("data")
        self.data = data if isinstance(data, (str, list)) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _benchmark(entry: dict[str, Any], i: int, report: _Report
               ) -> tuple[_Figures, dict[str, Any], dict[str, Any], str | None, int | None]:
    """The figures, the other settings, the request counts, the strategy and its concurrency of
    benchmark `i` (0.2 on)."""
    base = ("benchmarks", i)
    figures = _Figures()
    meta: dict[str, Any] = {}
    newer = isinstance(entry.get("config"), dict)          # 0.4 on
    metrics = entry.get("metrics") if isinstance(entry.get("metrics"), dict) else {}
    if newer:
        totals, totals_at = metrics.get("request_totals"), base + ("metrics", "request_totals")
        strategy_at = base + ("config", "strategy")
    else:
        totals, totals_at = entry.get("request_totals"), base + ("request_totals",)
        strategy_at = base + ("args", "strategy")
    totals = totals if isinstance(totals, dict) else {}
    for column, status in _COUNTS:
        figures.take(column, totals.get(status), common.path(*totals_at, status), whole=True)
    if "incomplete" in totals:
        meta["incomplete_requests"] = totals.get("incomplete")
    for column, metric, stat, unit, whole in _SUMMARY:
        at = ("metrics", metric, "successful", *stat)
        figures.take(column, _dig(entry, at), common.path(*base, *at), unit, whole)
    figures.take("duration_s", entry.get("duration"), common.path(*base, "duration"), "s")
    kind, concurrency = _strategy_settings(_dig(entry, strategy_at[2:]), figures, strategy_at)

    tool_tpot = _dig(metrics, ("time_per_output_token_ms", "successful"))
    if isinstance(tool_tpot, dict):
        meta["tool_time_per_output_token_ms"] = {k: tool_tpot.get(k) for k in ("mean", "median")}
    concurrency_seen = _dig(metrics, ("request_concurrency", "successful", "mean"))
    if concurrency_seen is not None:
        meta["measured_concurrency"] = concurrency_seen
    meta["strategy"] = _dig(entry, strategy_at[2:])
    meta["start_time"] = entry.get("start_time")
    meta["end_time"] = entry.get("end_time")
    if newer:
        config = entry["config"]
        backend = config.get("backend") if isinstance(config.get("backend"), dict) else {}
        model = _text(backend.get("model")) or report.model
        backend_kind = _text(backend.get("kind")) or report.backend
        meta.update(benchmark_id=config.get("id_"), run_id=config.get("run_id"),
                    run_index=config.get("run_index"), target=_text(backend.get("target")) or report.target,
                    sample_requests=config.get("sample_requests", config.get("sample_size")),
                    warmup_duration=entry.get("warmup_duration"),
                    cooldown_duration=entry.get("cooldown_duration"))
        constraints = config.get("constraints")
        if isinstance(constraints, dict):
            meta["constraints"] = sorted(constraints)
    else:
        args = entry.get("args") if isinstance(entry.get("args"), dict) else {}
        worker = entry.get("worker") if isinstance(entry.get("worker"), dict) else {}
        loader = entry.get("request_loader") if isinstance(entry.get("request_loader"), dict) else {}
        model = _text(worker.get("backend_model")) or report.model
        backend_kind = _text(worker.get("backend_type")) or report.backend
        meta.update(benchmark_id=entry.get("id_"), run_id=entry.get("run_id"),
                    strategy_index=args.get("strategy_index"), target=_text(worker.get("backend_target")),
                    data=loader.get("data"), max_number=args.get("max_number"),
                    max_duration=args.get("max_duration"), warmup_number=args.get("warmup_number"),
                    warmup_duration=args.get("warmup_duration"),
                    cooldown_number=args.get("cooldown_number"),
                    cooldown_duration=args.get("cooldown_duration"),
                    request_samples=entry.get("request_samples"))
        profile = _dig(args, ("profile", "type_"))
        if isinstance(profile, str):
            meta["profile"] = profile
    if report.profile and "profile" not in meta:
        meta["profile"] = report.profile
    if report.data is not None and "data" not in meta:
        meta["data"] = report.data
    if model:
        figures.values["model_id"] = model
    if backend_kind:
        figures.values["backend"] = backend_kind
    return figures, meta, totals, kind, concurrency


# --- per-request rows --------------------------------------------------------------------------

# column -> (path inside the record, the tool's unit for a time, whole number); per shape
_FIELDS_V2 = {"input_tokens": (("prompt_tokens",), None, True),
              "output_tokens": (("output_tokens",), None, True),
              "ttft_s": (("time_to_first_token_ms",), "ms", False),
              "latency_s": (("request_latency",), "s", False),
              "start_time_s": (("start_time",), "s", False),
              "tpot_ms": (("inter_token_latency_ms",), "ms", False)}
_FIELDS_V4 = {**_FIELDS_V2, "start_time_s": (("request_start_time",), "s", False)}


def _in_window(record: dict[str, Any], start: float, end: float) -> bool:
    """The tool's own rule (GenerativeRequestsAccumulator.get_within_range, 0.4 on) for a request
    its summary counts: it ended after the measured window opened and started before it closed."""
    began, ended = common.finite(record.get("request_start_time")), common.finite(record.get("request_end_time"))
    if ended is None or ended < start:
        return False
    return began <= end if began is not None else ended <= end


def _request_rows(entry: dict[str, Any], i: int, pid: str, totals: dict[str, Any], lines: _Lines,
                  newer: bool) -> tuple[list[dict[str, Any]], list[ParseError], dict[str, Any]]:
    """Rows for the requests of benchmark `i`, and what metadata_json says of them: none, with an
    error, when its lists are not the requests the summary counts (a sample, or warm-up and
    cool-down requests that the tool's own window rule does not account for) or a record holds
    something other than a number where one belongs."""
    base = ("benchmarks", i, "requests")
    requests = entry.get("requests")
    line = lines.at("benchmarks", i)
    if not isinstance(requests, dict):
        return [], [], {}
    lists = [(status, records) for status, records in requests.items()
             if status in _STATUSES and isinstance(records, list)]
    if not lists:
        return [], [], {}
    for status, records in lists:
        for j, record in enumerate(records):
            if not isinstance(record, dict):
                return [], [ParseError(line, f"{pid}: {common.path(*base, status, j)} is {_what(record)}, "
                                             "not a request record; its requests are left out")], {}
    kept = [(status, [(j, r) for j, r in enumerate(records)]) for status, records in lists]
    counted = {status: totals.get(status) for status in _STATUSES
               if isinstance(totals.get(status), int) and not isinstance(totals.get(status), bool)}

    def mismatch(groups: list) -> list[str]:
        held = {status: len(records) for status, records in groups}
        return [f"{held.get(s, 0)} of {counted[s]} {s}" for s in _STATUSES
                if s in counted and held.get(s, 0) != counted[s]]

    note: dict[str, Any] = {}
    short = mismatch(kept)
    window = (common.finite(_dig(entry, ("scheduler_metrics", "measure_start_time"))),
              common.finite(_dig(entry, ("scheduler_metrics", "measure_end_time"))))
    if short and newer and None not in window:
        inside = [(status, [(j, r) for j, r in records if _in_window(r, *window)]) for status, records in kept]
        if not mismatch(inside):
            left = sum(len(r) for _, r in kept) - sum(len(r) for _, r in inside)
            kept, short = inside, []
            note = {"requests_outside_window": left,
                    "requests_window": "scheduler_metrics.measure_start_time to measure_end_time"}
    if short:
        return [], [ParseError(line, f"{pid}: the report keeps {', '.join(short)} requests (sampled, or "
                                     "with requests its summary leaves out); its requests are left out and "
                                     "the point keeps the tool's summary")], {}
    fields = _FIELDS_V4 if newer else _FIELDS_V2
    error_at = ("info", "error") if newer else ("error",)
    rows: list[dict[str, Any]] = []
    for status, records in kept:
        for j, record in records:
            where = base + (status, j)
            row = {"point_id": pid, "request_idx": len(rows), "source_line": lines.at(*where),
                   "record_path": common.path(*where), "error": None}
            paths: dict[str, str] = {}
            for column, (at, unit, whole) in fields.items():
                value = _dig(record, at)
                if value is None:
                    continue
                number = common.finite(value)
                if number is None or (whole and not number.is_integer()):
                    return [], [ParseError(line, f"{pid}: {common.path(*where, *at)} is "
                                                 f"{_what(value) if number is None else repr(value)} "
                                                 "where a number belongs; its requests are left out")], {}
                row[column] = int(number) if whole else _in_column_unit(number, column, unit)
                paths[column] = common.path(*at)
            if row.get("output_tokens") is None or row["output_tokens"] < 2:
                row.pop("tpot_ms", None)          # no gap between tokens: the tool writes 0 or null
                paths.pop("tpot_ms", None)
            if status != "successful":
                message = _dig(record, error_at)
                if isinstance(message, str) and message:
                    row["error"] = message
                    paths["error"] = common.path(*error_at)
                else:
                    state = _dig(record, ("info", "status"))
                    row["error"] = status if not isinstance(state, str) else f"{status} ({state})"
            row["field_paths"] = common.paths_json(paths)
            rows.append(row)
    return rows, [], note


# --- 0.1 ---------------------------------------------------------------------------------------

def _parse_v01(name: str, doc: dict[str, Any], lines: _Lines, result: BenchParse) -> None:
    """0.1's GuidanceReport: each TextGenerationBenchmark is a point; it has no summary, so the
    point holds its counts (its results and errors) and settings, and its requests hold the
    figures."""
    index = 0
    used: set[str] = set()
    for r, report in enumerate(doc["benchmarks"]):
        if not isinstance(report, dict) or not isinstance(report.get("benchmarks"), list):
            result.errors.append(ParseError(lines.at("benchmarks", r), f"benchmarks[{r}] is not a "
                                                                        "benchmark report; not read"))
            continue
        args = report.get("args") if isinstance(report.get("args"), dict) else {}
        for b, bench in enumerate(report["benchmarks"]):
            index += 1
            where = ("benchmarks", r, "benchmarks", b)
            line = lines.at(*where)
            if not isinstance(bench, dict) or not isinstance(bench.get("results", []), list) \
                    or not isinstance(bench.get("errors", []), list):
                result.errors.append(ParseError(line, f"{common.path(*where)} is not a benchmark of "
                                                      "results and errors; not read"))
                continue
            figures = _Figures()
            mode = bench.get("mode")
            concurrency = 1 if mode == "synchronous" else None
            if mode == "synchronous":
                figures.values["max_concurrency"] = 1
            if mode == "asynchronous":
                figures.take("request_rate", bench.get("rate"), common.path(*where, "rate"))
            if figures.problems:
                result.errors.append(ParseError(line, f"{common.path(*where)}: {', '.join(figures.problems)} "
                                                      "where a number belongs; the point is left out"))
                continue
            results, errors = bench.get("results", []), bench.get("errors", [])
            pid = _unique(common.point_id(name, concurrency, index), index, used)
            row = _point_row(name, pid, concurrency, line, figures, _meta({
                "mode": mode, "rate_type": args.get("mode"), "rates": args.get("rate"),
                "target": args.get("target"), "data": args.get("data"), "data_type": args.get("data_type"),
                "tokenizer": args.get("tokenizer"), "max_number": args.get("max_number"),
                "max_duration": args.get("max_duration"),
                "counts_from": "the lengths of results and errors (0.1 writes no summary)"}), None)
            row.update(num_prompts=len(results) + len(errors), completed=len(results), failed=len(errors))
            if _text(args.get("model")):
                row["model_id"] = args["model"]
            if _text(args.get("backend_type")):
                row["backend"] = args["backend_type"]
            rows, problem = _v01_requests(pid, where, results, errors, lines)
            result.points.append(row)
            result.requests.extend(rows)
            if problem:
                result.errors.append(ParseError(line, f"{pid}: {problem}; its requests are left out"))


def _v01_requests(pid: str, where: tuple, results: list, errors: list, lines: _Lines
                  ) -> tuple[list[dict[str, Any]], str | None]:
    rows: list[dict[str, Any]] = []
    for j, record in enumerate(results):
        at = where + ("results", j)
        if not isinstance(record, dict):
            return [], f"{common.path(*at)} is {_what(record)}, not a result"
        row = {"point_id": pid, "request_idx": len(rows), "source_line": lines.at(*at),
               "record_path": common.path(*at), "error": None}
        paths: dict[str, str] = {}
        for column, key, whole in (("input_tokens", "prompt_token_count", True),
                                   ("output_tokens", "output_token_count", True),
                                   ("ttft_s", "first_token_time", False),
                                   ("start_time_s", "start_time", False)):
            value = record.get(key)
            if value is None:
                continue
            number = common.finite(value)
            if number is None or (whole and not number.is_integer()):
                return [], f"{common.path(*at, key)} is {_what(value)} where a number belongs"
            row[column] = int(number) if whole else number
            paths[column] = key
        start, end = common.finite(record.get("start_time")), common.finite(record.get("end_time"))
        if record.get("end_time") is not None and end is None:
            return [], f"{common.path(*at, 'end_time')} is {_what(record.get('end_time'))} where a number belongs"
        if start is not None and end is not None:
            row["latency_s"] = end - start                # the tool's own request latency
            paths["latency_s"] = "end_time - start_time"
        gaps = _dig(record, ("decode_times", "data"))
        if isinstance(gaps, list):
            if any(common.finite(g) is None for g in gaps):
                return [], f"{common.path(*at, 'decode_times', 'data')} holds something other than a number"
            row["itl_count"], row["itl_sum_s"] = len(gaps), float(sum(gaps))
            paths["itl_count"] = paths["itl_sum_s"] = "decode_times.data"
        row["field_paths"] = common.paths_json(paths)
        rows.append(row)
    for j, record in enumerate(errors):
        at = where + ("errors", j)
        if not isinstance(record, dict):
            return [], f"{common.path(*at)} is {_what(record)}, not an error record"
        message = record.get("message")
        rows.append({"point_id": pid, "request_idx": len(rows), "source_line": lines.at(*at),
                     "record_path": common.path(*at),
                     "error": str(message) if message not in (None, "") else "error",
                     "field_paths": common.paths_json({"error": "message"} if message not in (None, "") else {})})
    return rows, None


# --- shared ------------------------------------------------------------------------------------

def _unique(pid: str, index: int, used: set[str]) -> str:
    """A point id not yet given in this file (a file named for one point that holds several
    benchmarks gives each after the first `#<position>`)."""
    if pid in used:
        pid = f"{pid}#{index}"
    used.add(pid)
    return pid


def _meta(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _point_row(name: str, pid: str, concurrency: int | None, line: int, figures: _Figures,
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


# --- 0.2 on ------------------------------------------------------------------------------------

_STATS = ("mean", "median", "percentiles", "total_sum")


def _missing(entry: dict[str, Any]) -> list[str]:
    """What every benchmark the tool writes has and this one lacks: its counts, its duration and
    the successful requests' summary of each metric read (a YAML cut short still parses)."""
    totals_at = ("metrics", "request_totals") if isinstance(entry.get("config"), dict) else ("request_totals",)
    lacks = [common.path(*totals_at)] if not isinstance(_dig(entry, totals_at), dict) else []
    if "duration" not in entry:
        lacks.append("duration")
    for metric in dict.fromkeys(m for _, m, *_ in _SUMMARY):
        summary = _dig(entry, ("metrics", metric, "successful"))
        if not isinstance(summary, dict) or any(k not in summary for k in _STATS):
            lacks.append(common.path("metrics", metric, "successful"))
    return lacks


def _parse_report(name: str, doc: dict[str, Any], lines: _Lines, result: BenchParse) -> None:
    report = _Report(doc)
    used: set[str] = set()
    for i, entry in enumerate(doc["benchmarks"]):
        line = lines.at("benchmarks", i)
        if not isinstance(entry, dict) or not ("config" in entry or "args" in entry):
            result.errors.append(ParseError(line, f"benchmarks[{i}] is not a GuideLLM benchmark; not read"))
            continue
        figures, meta, totals, kind, concurrency = _benchmark(entry, i, report)
        index = i + 1
        pid = _unique(common.point_id(name, concurrency, index), index, used)
        missing = _missing(entry)
        if missing:
            result.errors.append(ParseError(line, f"{pid}: the benchmark has no {', '.join(missing)} (a "
                                                  "truncated or edited report); the point is left out"))
            continue
        if figures.problems:
            result.errors.append(ParseError(line, f"{pid}: {', '.join(figures.problems)} where a number "
                                                  "belongs; the point is left out"))
            continue
        rows, errors, note = _request_rows(entry, i, pid, totals, lines, isinstance(entry.get("config"), dict))
        meta = _meta({**meta, **note, "report_schema": report.schema})
        result.points.append(_point_row(name, pid, concurrency, line, figures, meta, report.version))
        result.requests.extend(rows)
        result.errors.extend(errors)


# --- CSV ---------------------------------------------------------------------------------------

_PERCENTILE_INDEX = {"p90": 7, "p99": 9}   # [min, 0.1, 1, 5, 10, 25, 75, 90, 95, 99, max]

# 0.4 on: column -> (group, "Successful <unit>", statistic, the tool's unit for a time)
_CSV_V4 = (
    ("mean_ttft_ms", "Time to First Token", "Successful ms", "Mean", "ms"),
    ("median_ttft_ms", "Time to First Token", "Successful ms", "Median", "ms"),
    ("p90_ttft_ms", "Time to First Token", "Successful ms", "p90", "ms"),
    ("p99_ttft_ms", "Time to First Token", "Successful ms", "p99", "ms"),
    ("mean_tpot_ms", "Inter Token Latency", "Successful ms", "Mean", "ms"),
    ("median_tpot_ms", "Inter Token Latency", "Successful ms", "Median", "ms"),
    ("p90_tpot_ms", "Inter Token Latency", "Successful ms", "p90", "ms"),
    ("p99_tpot_ms", "Inter Token Latency", "Successful ms", "p99", "ms"),
    ("mean_e2el_ms", "Request Latency", "Successful Sec", "Mean", "s"),
    ("median_e2el_ms", "Request Latency", "Successful Sec", "Median", "s"),
    ("request_throughput", "Server Throughput", "Successful Requests/Sec", "Mean", None),
    ("output_throughput", "Token Throughput", "Successful Output Tokens/Sec", "Mean", None),
    ("total_token_throughput", "Token Throughput", "Successful Total Tokens/Sec", "Mean", None),
)
# 0.2 - 0.3: column -> (metric as the header writes it, statistic, the tool's unit for a time)
_CSV_V2 = (
    ("mean_ttft_ms", "Time to first token ms", "mean", "ms"),
    ("median_ttft_ms", "Time to first token ms", "median", "ms"),
    ("p90_ttft_ms", "Time to first token ms", "p90", "ms"),
    ("p99_ttft_ms", "Time to first token ms", "p99", "ms"),
    ("mean_tpot_ms", "Inter token latency ms", "mean", "ms"),
    ("median_tpot_ms", "Inter token latency ms", "median", "ms"),
    ("p90_tpot_ms", "Inter token latency ms", "p90", "ms"),
    ("p99_tpot_ms", "Inter token latency ms", "p99", "ms"),
    ("mean_e2el_ms", "Request latency", "mean", "s"),
    ("median_e2el_ms", "Request latency", "median", "s"),
    ("request_throughput", "Requests per second", "mean", None),
    ("output_throughput", "Output tokens per second", "mean", None),
    ("total_token_throughput", "Tokens per second", "mean", None),
)
_PERCENTILES_V2 = "[min, 0.1, 1, 5, 10, 25, 75, 90, 95, 99, max]"


def _cell(column: int, line: int, header: str, inside: str | None = None) -> str:
    """Where a CSV figure is: its line, column and header, and the JSON path inside the cell
    where the cell holds JSON."""
    return f"line {line}, column {column + 1}: {header}" + (f", at {inside}" if inside else "")


def _csv_value(raw: str) -> Any:
    """A CSV cell as the number it holds, or the text where it holds none ("" is absent)."""
    text = raw.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _count_of(value: Any) -> Any:
    """A CSV cell's whole number as an int (a setting kept in metadata_json), else as it is."""
    number = common.finite(value)
    count = None if number is None else _whole(number)
    return value if count is None else count


def _percentile(raw: str, which: str) -> Any:
    """One percentile of the exporter's "[min, 0.1, 1, ..., 99, max]" list, or the text."""
    text = raw.strip()
    if not text:
        return None
    parts = text.strip("[]").split(",")
    if not (text.startswith("[") and text.endswith("]")) or len(parts) != 11:
        return text
    return _csv_value(parts[_PERCENTILE_INDEX[which]])


def _json_cell(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _siblings_hold_report(name: str, siblings: frozenset[str]) -> bool:
    """The JSON or YAML report the CSV was exported beside (same folder and stem)."""
    def stem(n: str) -> str:
        base = PurePosixPath(n[:-3] if n.endswith(".gz") else n)
        return str(base.with_suffix("")) if base.suffix else str(base)
    own = stem(name)
    return any(stem(s) == own and PurePosixPath(s[:-3] if s.endswith(".gz") else s).suffix.lower()
               in (".json", ".yaml", ".yml") for s in siblings)


def _csv_rows(text: str, result: BenchParse) -> list[tuple[int, list[str]]]:
    """(first line, cells) of each CSV row, up to a row the csv module cannot read (an unclosed
    quote: a file cut short), which is an error."""
    rows: list[tuple[int, list[str]]] = []
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    line = 1
    try:
        for cells in reader:
            rows.append((line, cells))
            line = reader.line_num + 1
    except csv.Error as exc:
        result.errors.append(ParseError(line, f"not a readable CSV row: {exc}; the rest of the file is not read"))
    return rows


def _parse_csv(name: str, text: str, kind: str, result: BenchParse) -> None:
    table = _csv_rows(text, result)
    depth = 3 if kind == "v4" else 1
    if len(table) <= depth:
        result.errors.append(ParseError(table[-1][0] if table else 1, "GuideLLM CSV export without benchmark rows"))
        return
    heads = [cells for _, cells in table[:depth]]
    width = len(heads[0])
    if any(len(h) != width for h in heads):
        result.errors.append(ParseError(depth, "GuideLLM CSV export whose header rows differ in width; "
                                               "the report is not read"))
        return
    headers = [" / ".join(h[j] for h in heads if h[j]) for j in range(width)]
    columns = {tuple(h[j] for h in heads): j for j in range(width)}
    used: set[str] = set()
    for n, (row_line, cells) in enumerate(table[depth:], start=1):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != width:
            result.errors.append(ParseError(row_line, f"CSV row {n} has {len(cells)} cells where the header "
                                                      f"has {width}; the point is left out"))
            continue
        reader = _csv_v4 if kind == "v4" else _csv_v2
        figures, meta, concurrency, version = reader(cells, columns, headers, row_line)
        pid = _unique(common.point_id(name, concurrency, n), n, used)
        if figures.problems:
            result.errors.append(ParseError(row_line, f"{pid}: {', '.join(figures.problems)} where a number "
                                                      "belongs; the point is left out"))
            continue
        result.points.append(_point_row(name, pid, concurrency, row_line, figures, _meta(meta), version))


def _csv_strategy(strategy: dict[str, Any], figures: _Figures, where: Callable[[str], str]
                  ) -> int | None:
    kind = strategy.get("type_")
    if kind == "synchronous":
        figures.values["max_concurrency"] = 1
        return 1
    concurrency = None
    streams = strategy.get("streams")
    if kind == "concurrent" and isinstance(streams, int) and not isinstance(streams, bool) and streams > 0:
        concurrency = streams
        figures.take("max_concurrency", streams, where("streams"), whole=True)
    if kind in ("constant", "poisson"):
        figures.take("request_rate", strategy.get("rate"), where("rate"))
    return concurrency


def _csv_v4(cells: list[str], columns: dict, headers: list[str], line: int
            ) -> tuple[_Figures, dict[str, Any], int | None, str | None]:
    figures = _Figures()

    def get(*key: str) -> tuple[str | None, int | None]:
        j = columns.get(key)
        return (None, None) if j is None else (cells[j], j)

    for column, group, status_unit, stat, unit in _CSV_V4:
        raw, j = get(group, status_unit, "Percentiles" if stat in _PERCENTILE_INDEX else stat)
        if raw is None:
            continue
        value = _percentile(raw, stat) if stat in _PERCENTILE_INDEX else _csv_value(raw)
        where = _cell(j, line, headers[j]) + (f" ({stat})" if stat in _PERCENTILE_INDEX else "")
        figures.take(column, value, where, unit)
    for column, status in _COUNTS:
        raw, j = get("Request Counts", status.capitalize(), "")
        if raw is not None:
            figures.take(column, _csv_value(raw), _cell(j, line, headers[j]), whole=True)
    raw, j = get("Timings", "Duration", "Sec")
    if raw is not None:
        figures.take("duration_s", _csv_value(raw), _cell(j, line, headers[j]), "s")
    meta: dict[str, Any] = {}
    kind = (get("Benchmark", "Strategy", "")[0] or "").strip()
    run_index = _csv_value(get("Run Info", "Run Index", "")[0] or "")
    profile_raw, profile_j = get("Run Info", "Profile", "")
    profile = _json_cell(profile_raw or "")
    strategy: dict[str, Any] = {"type_": kind} if kind else {}
    strategy_where: Callable[[str], str] = lambda key: ""  # noqa: E731
    done = profile.get("completed_strategies")
    if isinstance(run_index, float) and run_index.is_integer() and isinstance(done, list) \
            and 0 <= int(run_index) < len(done) and isinstance(done[int(run_index)], dict) \
            and done[int(run_index)].get("type_") == kind:
        strategy = done[int(run_index)]
        k = int(run_index)
        strategy_where = lambda key: _cell(  # noqa: E731
            profile_j, line, headers[profile_j], f"completed_strategies[{k}].{key}")
    arguments_raw, arguments_j = get("Runtime Info", "Arguments", "")
    arguments = _json_cell(arguments_raw or "")           # 0.5 - 0.6: the args; 0.7 on: the config
    spec = arguments.get("spec") if isinstance(arguments.get("spec"), dict) else {}
    if kind in ("concurrent", "constant", "poisson") and not ({"streams", "rate"} & strategy.keys()) \
            and isinstance(run_index, float) and run_index.is_integer():
        # the profile's list of streams or rates, one per strategy, as the run was asked for
        k, key = int(run_index), "streams" if kind == "concurrent" else "rate"
        profile_args = spec.get("profile") if isinstance(spec.get("profile"), dict) else {}
        if profile_args.get("kind") == kind and isinstance(profile_args.get(key), list):
            values, at = profile_args[key], f"spec.profile.{key}[{k}]"
        elif arguments.get("profile") == kind and isinstance(arguments.get("rate"), list):
            values, at = arguments["rate"], f"rate[{k}]"   # 0.5 - 0.6 --rate: streams or rates
        else:
            values, at = [], ""
        if 0 <= k < len(values):
            value = values[k]
            if kind == "concurrent" and isinstance(value, float) and value.is_integer():
                value = int(value)
            strategy = {**strategy, key: value}
            where_of = _cell(arguments_j, line, headers[arguments_j], at)
            strategy_where = lambda _key: where_of  # noqa: E731
    concurrency = _csv_strategy(strategy, figures, strategy_where)
    backend = _json_cell(get("Run Info", "Backend", "")[0] or "")
    spec_backend = spec.get("backend") if isinstance(spec.get("backend"), dict) else {}
    model = _text(backend.get("model")) or _text(arguments.get("model")) or _text(spec_backend.get("model"))
    backend_kind = (_text(backend.get("kind")) or _text(arguments.get("backend"))
                    or _text(spec_backend.get("kind")))
    if model:
        figures.values["model_id"] = model
    if backend_kind:
        figures.values["backend"] = backend_kind
    runtime = _json_cell(get("Runtime Info", "Metadata", "")[0] or "")
    version = runtime.get("guidellm_version") if isinstance(runtime.get("guidellm_version"), str) else None
    incomplete = _csv_value(get("Request Counts", "Incomplete", "")[0] or "")
    meta.update(strategy=strategy or None, run_index=_count_of(run_index), target=backend.get("target"),
                incomplete_requests=_count_of(incomplete), report_schema=runtime.get("version"),
                profile=profile.get("type_"))
    return figures, meta, concurrency, version


def _csv_v2(cells: list[str], columns: dict, headers: list[str], line: int
            ) -> tuple[_Figures, dict[str, Any], int | None, str | None]:
    figures = _Figures()

    def get(header: str) -> tuple[str | None, int | None]:
        j = columns.get((header,))
        return (None, None) if j is None else (cells[j], j)

    for column, metric, stat, unit in _CSV_V2:
        if stat in _PERCENTILE_INDEX:
            raw, j = get(f"Successful {metric} {_PERCENTILES_V2}")
            value = None if raw is None else _percentile(raw, stat)
        else:
            raw, j = get(f"Successful {metric} {stat}")
            value = None if raw is None else _csv_value(raw)
        if raw is not None:
            where = _cell(j, line, headers[j]) + (f" ({stat})" if stat in _PERCENTILE_INDEX else "")
            figures.take(column, value, where, unit)
    for column, status in _COUNTS:
        raw, j = get(f"{status.capitalize()} Requests")
        if raw is not None:
            figures.take(column, _csv_value(raw), _cell(j, line, headers[j]), whole=True)
    raw, j = get("Duration")
    if raw is not None:
        figures.take("duration_s", _csv_value(raw), _cell(j, line, headers[j]), "s")
    args_raw, args_j = get("Args")
    args = _json_cell(args_raw or "")
    strategy = args.get("strategy") if isinstance(args.get("strategy"), dict) else {}
    concurrency = _csv_strategy(
        strategy, figures, lambda key: _cell(args_j, line, headers[args_j], f"strategy.{key}"))
    worker = _json_cell(get("Worker")[0] or "")
    if _text(worker.get("backend_model")):
        figures.values["model_id"] = worker["backend_model"]
    if _text(worker.get("backend_type")):
        figures.values["backend"] = worker["backend_type"]
    meta = {"strategy": strategy or None, "name": (get("Name")[0] or None),
            "target": worker.get("backend_target"),
            "incomplete_requests": _count_of(_csv_value(get("Incomplete Requests")[0] or "")),
            "profile": _dig(args, ("profile", "type_"))}
    return figures, meta, concurrency, None


# --- entry point -------------------------------------------------------------------------------

def parse(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """Points, per-request rows and errors of one GuideLLM report (JSON, YAML or CSV). A CSV
    exported beside its JSON or YAML report (same stem) gives nothing: the report is read."""
    result = BenchParse()
    text = decode(data).lstrip("\ufeff")
    kind = _csv_kind(text[:_HEAD])
    if kind:
        if not _siblings_hold_report(name, siblings):
            _parse_csv(name, text, kind, result)
        return result
    doc, lines, errors = _load(text)
    result.errors.extend(errors)
    if errors or lines is None:
        return result
    benchmarks = doc.get("benchmarks") if isinstance(doc, dict) else None
    if not isinstance(benchmarks, list):
        result.errors.append(ParseError(lines.first, "not a GuideLLM report: no list of benchmarks; not read"))
        return result
    if not benchmarks:
        result.errors.append(ParseError(lines.first, "GuideLLM report without benchmarks"))
        return result
    if isinstance(benchmarks[0], dict) and isinstance(benchmarks[0].get("benchmarks"), list) \
            and "type_" not in benchmarks[0]:
        _parse_v01(name, doc, lines, result)
    else:
        _parse_report(name, doc, lines, result)
    return result

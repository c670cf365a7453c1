"""inference-perf (kubernetes-sigs/inference-perf) report files, every release from v0.1.0 on.

The tool writes, per run, JSON reports named `<prefix>stage_<N>_lifecycle_metrics.json` (one per
load stage), `<prefix>summary_lifecycle_metrics.json` (every stage together) and, when
`report.request_lifecycle.per_request` is set, `<prefix>per_request_lifecycle_metrics.json` (one
record per request of every stage). Its local writer indents them (`json.dumps(indent=2)`), its
GCS and S3 writers write one line. They are recognised by their content, whatever their names.

A lifecycle report is `{benchmark_time_seconds (v0.5.0 on), load_summary, successes, failures}`:
`load_summary.count` requests were sent, `successes.count` of them succeeded, `failures.count`
failed. A stage's load_summary also holds `requested_rate` and `achieved_rate` (v0.1.1 on) and,
for a concurrent stage (v0.3.0 on), `concurrency`. Every time is in seconds; each distribution is
{mean, min, max, percentiles}, its median keyed `p50` before v0.2.0 and `median` from v0.2.0.
`time_to_first_token` and `time_per_output_token` ((last token - first token) / (tokens - 1)) are
per request, over the successful requests that streamed two tokens or more;
`inter_token_latency` is every gap between two tokens of those requests; `request_latency` is
end - start of each successful request. Throughputs divide by `benchmark_time_seconds`, the
first start to the last end of the stage's requests.

Each stage report is one point: `common.point_id(name, concurrency, 1)`, concurrency from
`load_summary.concurrency`; a rate stage keeps its `requested_rate` as request_rate. A concurrent
stage's `requested_rate` is not a rate (the tool enqueues all of its `num_requests` within one
second, so it equals num_requests): it is kept in metadata_json only. The summary across stages
is no point of its own (its figures mix the stages): it gives no rows and no error. Neither does a
per-LoRA-adapter report across stages; one per adapter and stage is a point, named by its file.

The per-request records name no stage (the tool drops `stage_id` when it writes them), so their
requests meet a stage's point where the file's name names the point (`<workload>__cNN.` as
report prefix, the same for the stage report beside it) or where one stage report alone is beside
them (a run of one stage); otherwise they are kept under a point of
their own and an error says so. Each record gives start_time, end_time (latency = end - start),
its tokens and the times its tokens arrived: ttft = first token time - start_time (for a request
that streamed two tokens or more, as the tool counts it), the gaps' count and sum from the first
to the last token. inference-perf writes no CSV export.
"""
from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any

from stages.ingest.parsers.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError

TOOL = "inference_perf"

# The first bytes of a report as the tool writes it (its key order, any indentation): a lifecycle
# report starts with load_summary (benchmark_time_seconds before it from v0.5.0), whose first key
# is count (the Prometheus reports' load_summary is empty); a per-request report is a list of
# records starting with start_time, end_time. The second per-request shape is the same records
# saved again with sorted keys.
_LIFECYCLE_HEAD = re.compile(
    r'\A\s*\{\s*(?:"benchmark_time_seconds"\s*:\s*[-+0-9.eEinfatyNI]+\s*,\s*)?'
    r'"load_summary"\s*:\s*\{\s*"count"\s*:')
_REQUESTS_HEAD = (
    re.compile(r'\A\s*\[\s*\{\s*"start_time"\s*:\s*[-+0-9.eE]+\s*,\s*"end_time"\s*:'),
    re.compile(r'\A\s*\[\s*\{\s*"end_time"\s*:\s*[-+0-9.eE]+\s*,\s*"error"\s*:'),
)
_HEAD_BYTES = 4096
# A lifecycle report saved with other key order is parsed whole to be recognised, up to this size
# (the tool's own are a few KiB).
_PARSE_TO_RECOGNISE = 8 * 1024 * 1024
_WS = re.compile(r"[ \t\n\r]*")
_NONE = object()

# Names the tool gives its lifecycle reports (after any report_file_prefix).
_ADAPTER_STAGE_NAME = re.compile(r"adapter_(.+)_stage_(\d+)_lifecycle_metrics")
_ADAPTER_NAME = re.compile(r"adapter_(.+)_lifecycle_metrics")
_STAGE_NAME = re.compile(r"stage_(\d+)_lifecycle_metrics")
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

# Per-request record fields, newest layout first: v0.6.0 on (request_metrics / response_metrics),
# v0.5.0 (response_info), v0.1.1 - v0.4.0 (flat info). v0.1.0 records have no info at all.
_INPUT_TOKENS = (("info", "request_metrics", "text", "input_tokens"), ("info", "input_tokens"))
_OUTPUT_TOKENS = (("info", "response_metrics", "output_tokens"), ("info", "response_info", "output_tokens"),
                  ("info", "output_tokens"))
_TOKEN_TIMES = (("info", "response_metrics", "output_token_times"),
                ("info", "response_info", "output_token_times"), ("info", "output_token_times"))
_RECORD_KEYS = {"start_time", "end_time", "request", "error"}


def recognise(name: str, data: bytes) -> bool:
    """An inference-perf lifecycle report (stage or summary) or per-request report, by its first
    bytes; a lifecycle report saved with another key order is parsed to be sure. Its Prometheus
    and session reports are not recognised (they hold no client-side benchmark point)."""
    head = decode(data[:_HEAD_BYTES])
    if _LIFECYCLE_HEAD.match(head) or any(p.match(head) for p in _REQUESTS_HEAD):
        return True
    if head.lstrip()[:1] != "{" or '"load_summary"' not in decode(data[:64 * 1024]) \
            or len(data) > _PARSE_TO_RECOGNISE:
        return False
    try:
        obj = json.loads(decode(data))
    except (json.JSONDecodeError, RecursionError):
        return False
    return _is_lifecycle(obj)


def parse(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """The points of a stage report (one), of a summary report (none), or the requests of a
    per-request report; errors, never an exception, for a file that is not what it says."""
    text = decode(data)
    stripped = text.lstrip()
    if not stripped:
        return BenchParse(errors=[ParseError(1, "empty inference-perf report")])
    line = text.count("\n", 0, len(text) - len(stripped)) + 1
    if stripped[0] == "[":
        return _requests(name, text, line, siblings)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return BenchParse(errors=[ParseError(exc.lineno, f"not valid JSON: {exc.msg} (line {exc.lineno} "
                                                         f"column {exc.colno}); the report is not read")])
    except RecursionError:
        return BenchParse(errors=[ParseError(line, "JSON nested too deep; the report is not read")])
    if not _is_lifecycle(obj):
        return BenchParse(errors=[ParseError(line, "not an inference-perf lifecycle report (an object with "
                                                   "load_summary, successes and failures); not read")])
    return _lifecycle(name, obj, line)


# ---------------------------------------------------------------- lifecycle reports

def _is_lifecycle(obj: Any) -> bool:
    return (isinstance(obj, dict) and isinstance(obj.get("load_summary"), dict)
            and "count" in obj["load_summary"] and isinstance(obj.get("successes"), dict)
            and isinstance(obj["successes"].get("latency"), dict) and isinstance(obj.get("failures"), dict))


def _report_kind(name: str) -> dict[str, Any]:
    """What the file's name says it is: a stage (its number), an adapter's report, the summary."""
    base = PurePosixPath(name).name
    if m := _ADAPTER_STAGE_NAME.search(base):
        return {"report": "adapter_stage", "lora_adapter": m.group(1), "stage": int(m.group(2))}
    if m := _ADAPTER_NAME.search(base):
        return {"report": "adapter", "lora_adapter": m.group(1)}
    if m := _STAGE_NAME.search(base):
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
        value = _at(obj, parts)
        if value is None:
            return
        where = common.path(*parts)
        number = common.finite(value)
        if number is None:
            problems.append(f"{where} is {_what(value)}")
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
                problems.append(f"{common.path('successes', 'latency', key)} is {_what(dist)}")
            continue
        for stat in stats:
            found = next((k for k in _MEDIAN_KEYS if k in dist), None) if stat == "median" else stat
            if found is not None:
                take(f"{stat}_{stem}_ms", ("successes", "latency", key, found), "ms")

    concurrency = _count(load.get("concurrency"))
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
    ntpot = _at(succ, ("latency", "normalized_time_per_output_token"))
    if isinstance(ntpot, dict):
        keep("mean_ntpot_ms", ntpot.get("mean"), 1000.0)
        keep("median_ntpot_ms", next((ntpot[k] for k in _MEDIAN_KEYS if k in ntpot), None), 1000.0)
    keep("input_tokens_per_sec", _at(succ, ("throughput", "input_tokens_per_sec")))
    keep("mean_prompt_len", _at(succ, ("prompt_len", "mean")))
    keep("mean_output_len", _at(succ, ("output_len", "mean")))
    keep("cached_prompt_tokens", _at(succ, ("prompt_tokens", "cached")))
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


# ---------------------------------------------------------------- per-request reports

def _requests(name: str, text: str, line: int, siblings: frozenset[str]) -> BenchParse:
    records, errors = _array(text)
    if errors:
        return BenchParse(errors=errors)
    if not records:
        return BenchParse()
    result = BenchParse()
    point_id = _requests_point(name, line, siblings, result.errors)
    for idx, (rec_line, rec) in enumerate(records):
        if not isinstance(rec, dict) or not _RECORD_KEYS <= rec.keys():
            result.errors.append(ParseError(rec_line, f"per-request record [{idx}] is not an inference-perf "
                                                      "request record; left out"))
            continue
        row, problems = _request_row(rec)
        for problem in problems:
            result.errors.append(ParseError(rec_line, f"per-request record [{idx}]: {problem}; left out of its row"))
        row.update({"point_id": point_id, "request_idx": idx, "record_path": common.path(idx),
                    "source_line": rec_line})
        result.requests.append(row)
    return result


def _requests_point(name: str, line: int, siblings: frozenset[str], errors: list[ParseError]) -> str:
    """The point the requests belong to: the one the file's name names, else that of the one
    stage report beside them (read through common.Siblings), else one of their own (with an
    error: the records cannot be tied to a stage)."""
    stem = PurePosixPath(name).name.split(".", 1)[0]
    if common.split_point_id(stem)[0] is not None:
        return stem
    point_id = common.point_id(name, None, 1)
    stages = sorted(s for s in siblings if _STAGE_NAME.search(PurePosixPath(s).name)
                    and not _ADAPTER_STAGE_NAME.search(PurePosixPath(s).name))
    read = getattr(siblings, "read", None)
    if len(stages) == 1 and read is not None:      # the one stage beside them: its point
        data = read(stages[0])
        points = parse(stages[0], data, frozenset()).points if data is not None else []
        if len(points) == 1:
            return points[0]["point_id"]
    where = (f"; they all belong to {PurePosixPath(stages[0]).name}, the only stage report beside it"
             if len(stages) == 1 else "")
    errors.append(ParseError(line, f"{point_id}: inference-perf's per-request records name no stage, and the "
                                   f"file's name names no point (<workload>__cNN), so its requests are kept "
                                   f"under {point_id}, which no stage report's point meets{where}"))
    return point_id


def _array(text: str) -> tuple[list[tuple[int, Any]], list[ParseError]]:
    """(line, element) of each element of the top-level JSON array, each element's line where it
    starts; nothing but an error when the array is not valid JSON through to its end."""
    decoder = json.JSONDecoder()
    pos = _WS.match(text, 0).end() + 1       # past "["
    line = text.count("\n", 0, pos) + 1
    out: list[tuple[int, Any]] = []
    pos = _WS.match(text, pos).end()
    if text.startswith("]", pos):
        rest = _WS.match(text, pos + 1).end()
        return ([], []) if rest == len(text) else ([], [_bad(text, rest, "text after the array")])
    mark = 0
    while True:
        line += text.count("\n", mark, pos)
        mark = pos
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            return [], [ParseError(exc.lineno, f"not valid JSON: {exc.msg} (line {exc.lineno} column "
                                               f"{exc.colno}); the per-request report is not read")]
        except RecursionError:
            return [], [ParseError(line, "JSON nested too deep; the per-request report is not read")]
        out.append((line, obj))
        pos = _WS.match(text, end).end()
        if text.startswith(",", pos):
            pos = _WS.match(text, pos + 1).end()
            continue
        if text.startswith("]", pos):
            rest = _WS.match(text, pos + 1).end()
            return (out, []) if rest == len(text) else ([], [_bad(text, rest, "text after the array")])
        return [], [_bad(text, pos, "expected ',' or ']'" if pos < len(text) else "the file ends inside the array")]


def _bad(text: str, pos: int, what: str) -> ParseError:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return ParseError(line, f"not valid JSON: {what} (line {line} column {column}); the per-request "
                            "report is not read")


def _request_row(rec: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    problems: list[str] = []
    fields: dict[str, str] = {}
    row: dict[str, Any] = {"input_tokens": None, "output_tokens": None, "ttft_s": None, "latency_s": None,
                           "itl_count": None, "itl_sum_s": None, "start_time_s": None, "tpot_ms": None}

    def number(parts: tuple[str, ...]) -> float | None:
        value = _at(rec, parts)
        if value is None:
            return None
        got = common.finite(value)
        if got is None:
            problems.append(f"{common.path(*parts)} is {_what(value)}")
        return got

    start, end = number(("start_time",)), number(("end_time",))
    if start is not None:
        row["start_time_s"] = start
        fields["start_time_s"] = "start_time"
    if start is not None and end is not None:
        row["latency_s"] = end - start
        fields["latency_s"] = "end_time - start_time"
    for column, candidates in (("input_tokens", _INPUT_TOKENS), ("output_tokens", _OUTPUT_TOKENS)):
        parts = next((p for p in candidates if _at(rec, p) is not None), None)
        if parts is None:
            continue
        got = number(parts)
        if got is not None and got.is_integer() and got >= 0:
            row[column] = int(got)
            fields[column] = common.path(*parts)
        elif got is not None:
            problems.append(f"{common.path(*parts)} is {got!r}, not a token count")
    parts = next((p for p in _TOKEN_TIMES if _at(rec, p) is not None), None)
    if parts is not None:
        times = _at(rec, parts)
        where = common.path(*parts)
        bad = next((t for t in times if common.finite(t) is None), _NONE) if isinstance(times, list) else times
        if bad is not _NONE:
            problems.append(f"{where} is {_what(times)}" if not isinstance(times, list)
                            else f"{where} holds {_what(bad)}")
        elif len(times) > 1:
            if start is not None:
                row["ttft_s"] = float(times[0]) - start
                fields["ttft_s"] = f"{where}[0] - start_time"
            row["itl_count"] = len(times) - 1
            row["itl_sum_s"] = float(times[-1]) - float(times[0])
            fields["itl_count"] = where
            fields["itl_sum_s"] = f"{where}[-1] - {where}[0]"
    error = rec.get("error")
    row["error"] = _error_text(error)
    if error is not None:
        fields["error"] = "error"
    row["field_paths"] = common.paths_json(fields)
    return row, problems


def _error_text(error: Any) -> str | None:
    if error is None:
        return None
    if isinstance(error, dict):
        kind, msg = error.get("error_type"), error.get("error_msg")
        if kind is not None or msg is not None:
            return ": ".join(str(x) for x in (kind, msg) if x is not None)
        return json.dumps(error, sort_keys=True, ensure_ascii=False)
    return str(error)


# ---------------------------------------------------------------- helpers

def _at(obj: Any, parts: tuple[str, ...]) -> Any:
    for part in parts:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _count(value: Any) -> int | None:
    number = common.finite(value)
    return int(number) if number is not None and number.is_integer() and number > 0 else None


def _what(value: Any) -> str:
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

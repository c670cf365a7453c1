"""LLMPerf (ray-project/llmperf, `token_benchmark_ray.py --results-dir`) result files, and the
published files of its leaderboard and forks.

One run writes two files that share a name, `<name>_summary.json` and
`<name>_individual_responses.json` (`<name>` is `<model>_<mean input>_<mean output>`, sanitised):

- the summary: one JSON object, flat (LLMPerf's flatten_dict joins nested keys with `_`), the
  statistics of the successful requests under `results_<metric>_quantiles_p25..p99`, `_mean`,
  `_min`, `_max`, `_stddev` (seconds for the latencies), the counts `results_num_requests_started`
  (every request that came back, failed ones included), `results_num_completed_requests` (those
  without an error code), `results_number_errors`, `results_num_completed_requests_per_min`, the
  overall `results_mean_output_throughput_token_per_s` (output tokens of the successful requests
  over the test's wall time: not a mean over requests), and the settings (`model`,
  `num_concurrent_requests`, `mean_input_tokens`, ...), `--metadata` keys, `timestamp` (Unix
  seconds) and `version` (LLMPerf's RESULTS_VERSION, the results format's date);
- the requests: a JSON list, one object per request in the order they completed: `ttft_s`,
  `end_to_end_latency_s`, `inter_token_latency_s`, `number_input_tokens`,
  `number_output_tokens`, `error_code` (null when it succeeded), `error_msg`.

Shapes read (tests/fixtures/bench_tools/llmperf/README.md lists them with the files they were
modelled on):
- LLMPerf 2 (tag v2.0 to main, RESULTS_VERSION 2023-08-31): as above. Its `inter_token_latency_s`
  is per request the time to the first token plus every later gap, over the output tokens; it
  becomes the point's *_tpot_ms and the request's tpot_ms, as the tool recorded it (metadata
  `tpot_definition` says so). The leaderboard's published files add `--metadata` keys
  (`framework`, `model_size`, `api`) and, for some providers, a `GEN_TEXT` per request.
- the fork with RESULTS_VERSION 2025-10-14 (mtaylor-utilidata/llmperf): `inter_token_latency_s`
  split into `sum_inter_token_latency_s` and `mean_inter_token_latency_s` (the gaps after the
  first token over output tokens - 1: a time per output token without the first), each request's
  `start_time`/`end_time` (Unix seconds) and `request_id`; in its schedule mode the summary's
  statistics carry no `results_` prefix, `num_concurrent_requests` is the word "scheduled", and
  the files are `summary.json` and `individual_responses.json` in a folder of their own.
- a summary whose statistics are nested objects (`results_ttft_s: {quantiles: {p50: ...}}`, as a
  re-implementation serialises LLMPerf's summary before flattening) is read through the same
  flattening, each figure keeping its real path.

Point ids: the two files of one run meet in one point. The requests file does not state the
concurrency, so the id comes from the shared name alone: `common.point_id(<name>, None, 1)`,
`<name>` itself where it already names a point (`<workload>__c<NN>`), else `<name>__i1`; the
summary's `num_concurrent_requests` is the point's concurrency. `<name>` is the file's stem less
`_summary` / `_individual_responses`; for the schedule mode's bare `summary.json` it is the name of
the folder that holds it.

Nothing is guessed: a figure that is not a finite number is left out of the row. Where the
summary counts completed requests and still gives a statistic that is not a finite number, the
point is left out with an error (its other figures cannot be trusted); where no request completed
(pandas writes NaN for every statistic) the point keeps its counts and names the figures left out
in its metadata (`left_out`). A request's figure that is not a number is left out of its row, with
an error where the request succeeded. A file that is not valid JSON gives one error and no rows.
"""
from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from pathlib import PurePosixPath
from typing import Any

from stages.ingest.parsers.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError

TOOL = "llmperf"

SUMMARY_SUFFIX = "_summary"
REQUESTS_SUFFIX = "_individual_responses"
_HEAD_BYTES = 1 << 16
_RESULTS = "results_"

# Statistics of a metric: `<metric>_quantiles_pNN`, `_mean`, `_min`, `_max`, `_stddev`.
_STAT = re.compile(r"^(?:results_)?(?P<metric>[a-z_]+?)_(?:quantiles_p\d+|mean|min|max|stddev)$")
_METRICS = ("inter_token_latency_s", "sum_inter_token_latency_s", "mean_inter_token_latency_s",
            "ttft_s", "end_to_end_latency_s", "request_output_throughput_token_per_s",
            "number_input_tokens", "number_output_tokens")

# The per-request time per output token, by the key the release writes: (key, what it is).
TPOT_KEYS = (
    ("mean_inter_token_latency_s",
     "mean_inter_token_latency_s: per request, the gaps after the first token over output "
     "tokens - 1"),
    ("inter_token_latency_s",
     "inter_token_latency_s: per request, the time to the first token and every later gap over "
     "output tokens"),
)

# The summary's figures by their key without the `results_` prefix: latencies in seconds (to the
# *_ms columns), the statistics of the time per output token (after the TPOT_KEYS key), the rates
# (the completed requests per minute become requests per second) and the counts.
_LATENCIES = (
    ("mean_ttft_ms", "ttft_s_mean"), ("median_ttft_ms", "ttft_s_quantiles_p50"),
    ("p90_ttft_ms", "ttft_s_quantiles_p90"), ("p99_ttft_ms", "ttft_s_quantiles_p99"),
    ("mean_e2el_ms", "end_to_end_latency_s_mean"),
    ("median_e2el_ms", "end_to_end_latency_s_quantiles_p50"),
)
_TPOT_STATS = (("mean_tpot_ms", "mean"), ("median_tpot_ms", "quantiles_p50"),
               ("p90_tpot_ms", "quantiles_p90"), ("p99_tpot_ms", "quantiles_p99"))
_RATES = (("output_throughput", "mean_output_throughput_token_per_s", 1.0),
          ("request_throughput", "num_completed_requests_per_min", 1.0 / 60.0))
_COUNTS = (("num_prompts", "num_requests_started"), ("completed", "num_completed_requests"),
           ("failed", "number_errors"))

# Request columns: (column, the record's key, kind: a count or seconds).
_REQUEST_FIELDS = (
    ("input_tokens", "number_input_tokens", "int"),
    ("output_tokens", "number_output_tokens", "int"),
    ("ttft_s", "ttft_s", "s"),
    ("latency_s", "end_to_end_latency_s", "s"),
    ("start_time_s", "start_time", "s"),     # Unix seconds (the 2025-10-14 fork)
)
_TEXT_KEYS = ("generated_text", "GEN_TEXT")


# ---------------------------------------------------------------- recognising

_SUMMARY_MARKS = ('ttft_s_quantiles_p50"', '"results_ttft_s"', 'num_requests_started"',
                  'num_completed_requests"', '"num_launched"')
# LLMPerf's own statistic names, all three in a summary even where `num_concurrent_requests` comes
# last (the schedule mode) and the file is cut before it.
_STAT_MARKS = ('inter_token_latency_s_quantiles_p50"', 'ttft_s_quantiles_p50"',
               'end_to_end_latency_s_quantiles_p50"')
_REQUEST_MARKS = ('"ttft_s"', '"end_to_end_latency_s"', '"number_output_tokens"')


def recognise(name: str, data: bytes) -> bool:
    """An LLMPerf summary (an object naming `num_concurrent_requests` and one of LLMPerf's own
    figures, or the medians of its time to first token, inter-token and end-to-end latency) or a
    requests file (a list whose records hold `ttft_s`, `end_to_end_latency_s`,
    `number_output_tokens` and `error_code`), whatever the file's name; an empty list only under
    the name LLMPerf gives its requests file. Decided from the first 64 KiB, so a file cut short is
    still recognised (parse then says what is wrong with it)."""
    head = decode(data[:_HEAD_BYTES]).lstrip()
    if head.startswith("{"):
        return (('"num_concurrent_requests"' in head and any(m in head for m in _SUMMARY_MARKS))
                or all(m in head for m in _STAT_MARKS))
    if head.startswith("["):
        if all(m in head for m in _REQUEST_MARKS) and '"error_code"' in head:
            return True
        return head.rstrip() == "[]" and _stem(name).endswith(REQUESTS_SUFFIX[1:])
    return False


# ---------------------------------------------------------------- names and ids

def _stem(name: str) -> str:
    return PurePosixPath(name).name.split(".", 1)[0]


def run_name(name: str) -> str:
    """The name both files of a run share: the stem less `_summary` / `_individual_responses`
    (`bench/llama_550_150_summary.json` -> `llama_550_150`); for a bare `summary.json` or
    `individual_responses.json` (the fork's schedule mode), the folder that holds it."""
    stem = _stem(name)
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

def _line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _load(text: str) -> tuple[Any, int, ParseError | None]:
    """(the file's JSON value, the line where it starts, or the error that stops it)."""
    stripped = text.strip()
    if not stripped:
        return None, 1, ParseError(1, "empty LLMPerf result file")
    start = _line_at(text, len(text) - len(text.lstrip()))
    try:
        return json.loads(stripped), start, None
    except json.JSONDecodeError as exc:
        line = start + exc.lineno - 1
        return None, start, ParseError(line, f"not valid JSON: {exc.msg} (line {line} column "
                                             f"{exc.colno}); nothing read from the file")


def _record_lines(text: str, count: int) -> list[int]:
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


def _flatten(obj: dict[str, Any]) -> dict[str, tuple[Any, tuple[str, ...]]]:
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


def _number(value: Any) -> float | None:
    return common.finite(value)


def _what(value: Any) -> str:
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


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


# ---------------------------------------------------------------- the summary

def _summary_point(obj: dict[str, Any], name: str, line: int) -> tuple[dict[str, Any] | None,
                                                                       list[ParseError]]:
    pid = run_point_id(name)
    flat = _flatten(obj)
    row: dict[str, Any] = {"point_id": pid, "source_line": line, "tool": TOOL}
    paths: dict[str, str] = {}
    used: set[str] = set()
    bad: list[str] = []            # figures that are not finite numbers

    def get(key: str) -> tuple[str, Any, tuple[str, ...]] | None:
        """A figure under `results_<key>` (LLMPerf 2) or `<key>` (the fork's schedule mode)."""
        for full in (_RESULTS + key, key):
            if full in flat:
                return full, *flat[full]
        return None

    def figure(column: str, key: str, factor: float) -> None:
        found = get(key)
        if found is None:
            return
        full, value, where = found
        used.add(full)
        number = _number(value)
        if number is None:
            bad.append(f"{common.path(*where)} is {_what(value)}")
            return
        row[column] = number * factor
        paths[column] = common.path(*where)

    for column, key in _LATENCIES:
        figure(column, key, 1000.0)
    tpot_key, tpot_definition = next(
        ((k, d) for k, d in TPOT_KEYS if get(f"{k}_quantiles_p50") or get(f"{k}_mean")),
        (None, None))
    if tpot_key:
        for column, stat in _TPOT_STATS:
            figure(column, f"{tpot_key}_{stat}", 1000.0)
    for column, key, factor in _RATES:
        figure(column, key, factor)

    count_problems: list[str] = []
    for column, key in _COUNTS:
        found = get(key)
        if found is None:
            continue
        full, value, where = found
        used.add(full)
        number = _number(value)
        if number is None or number != int(number) or number < 0:
            count_problems.append(f"{common.path(*where)} is "
                                  f"{_what(value) if number is None else repr(value)}, not a count")
            continue
        row[column] = int(number)
        paths[column] = common.path(*where)

    errors: list[ParseError] = []
    if not used:
        return None, [ParseError(line, f"{pid}: the summary holds none of LLMPerf's figures (no "
                                       "request was measured); no point")]
    completed = row.get("completed")
    if count_problems or (bad and (completed is None or completed > 0)):
        problems = count_problems + bad
        errors.append(ParseError(line, f"{pid}: {'; '.join(problems)} where a number belongs; "
                                       "the point is left out"))
        return None, errors

    concurrency = obj.get("num_concurrent_requests")
    if isinstance(concurrency, int) and not isinstance(concurrency, bool) and concurrency > 0:
        row["max_concurrency"] = concurrency
        paths["max_concurrency"] = "num_concurrent_requests"
        used.add("num_concurrent_requests")
    model = obj.get("model")
    if isinstance(model, str) and model:
        row["model_id"] = model
        paths["model_id"] = "model"
        used.add("model")
    stamp = _number(obj.get("timestamp"))
    if stamp is not None and 0 < stamp < 1e11:
        row["date"] = datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y%m%d-%H%M%S")
        paths["date"] = "timestamp"
    version = obj.get("version")
    row["tool_version"] = (str(version) if isinstance(version, (str, int, float)) and version != ""
                           else None)

    workload, name_concurrency, repeat = common.split_point_id(pid)
    row["workload"] = workload
    row["concurrency"] = row.get("max_concurrency", name_concurrency)
    row["repeat"] = repeat or 1

    extra: dict[str, Any] = {}
    for key, (value, where) in flat.items():
        if key in used or key in ("version",) or isinstance(value, (list, dict)):
            continue
        stat = _STAT.match(key)
        if stat and stat.group("metric") in _METRICS:
            continue                      # the statistics the columns do not hold stay in the file
        extra[key] = _jsonable(value)
    if tpot_definition:
        extra["tpot_definition"] = tpot_definition
    if bad:
        extra["left_out"] = sorted(bad)
    row["metadata_json"] = json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None
    row["summary_paths"] = common.paths_json(paths)
    return row, errors


# ---------------------------------------------------------------- the requests

def _error_of(record: dict[str, Any]) -> tuple[str | None, list[str]]:
    """The request's error as text (null when it succeeded), and the keys it came from."""
    code = record.get("error_code")
    if code is None:
        return None, []
    message = record.get("error_msg")
    text = str(int(code)) if isinstance(code, float) and code.is_integer() else str(code)
    if isinstance(message, str) and message.strip():
        return f"{text}: {message.strip()}", ["error_code", "error_msg"]
    return text, ["error_code"]


def _requests(records: list[Any], text: str, name: str) -> tuple[list[dict[str, Any]],
                                                                   list[ParseError]]:
    pid = run_point_id(name)
    lines = _record_lines(text, len(records))
    rows: list[dict[str, Any]] = []
    errors: list[ParseError] = []
    tpot_key = next((k for k, _ in TPOT_KEYS
                     if any(isinstance(r, dict) and k in r for r in records)), None)
    for idx, (record, line) in enumerate(zip(records, lines)):
        if not isinstance(record, dict):
            errors.append(ParseError(line, f"{pid}: record [{idx}] is {_what(record)}, not a "
                                           "request; left out"))
            continue
        error, error_keys = _error_of(record)
        row: dict[str, Any] = {"point_id": pid, "request_idx": idx, "error": error,
                               "source_line": line, "record_path": common.path(idx)}
        fields: dict[str, str] = {"error": error_keys[0]} if error_keys else {}
        bad: list[str] = []

        def take(column: str, key: str, kind: str) -> None:
            if key not in record:
                return
            value = record[key]
            number = _number(value)
            if number is None or (kind == "int" and number != int(number)):
                if value is not None:
                    bad.append(f"{key} is {_what(value) if number is None else repr(value)}")
                return
            row[column] = (int(number) if kind == "int"
                           else number * (1000.0 if kind == "ms" else 1.0))
            fields[column] = key

        for column, key, kind in _REQUEST_FIELDS:
            take(column, key, kind)
        if tpot_key:
            take("tpot_ms", tpot_key, "ms")
        for key in _TEXT_KEYS:
            if isinstance(record.get(key), str):
                row["generated_text"] = record[key].replace("\x00", "")
                fields["generated_text"] = key
                break
        row["field_paths"] = common.paths_json(fields)
        if bad and error is None:
            errors.append(ParseError(line, f"{pid}: request [{idx}]: {', '.join(bad)} where a "
                                           "number belongs; left out of its row"))
        rows.append(row)
    return rows, errors


# ---------------------------------------------------------------- parse

def parse(name: str, data: bytes, siblings: frozenset[str] = frozenset()) -> BenchParse:
    """The point of a summary file, or the request rows of a requests file, with errors for
    whatever could not be read. LLMPerf writes no CSV, so `siblings` changes nothing."""
    result = BenchParse()
    text = decode(data)
    value, line, error = _load(text)
    if error:
        result.errors.append(error)
        return result
    if isinstance(value, dict):
        point, errors = _summary_point(value, name, line)
        result.errors.extend(errors)
        if point is not None:
            result.points.append(point)
    elif isinstance(value, list):
        rows, errors = _requests(value, text, name)
        result.requests.extend(rows)
        result.errors.extend(errors)
    else:
        result.errors.append(ParseError(line, "an LLMPerf result is a JSON object (the summary) or "
                                              f"a list (the requests), not {_what(value)}"))
    return result

"""Benchmark result files: `vllm bench serve --save-result [--save-detailed]` JSON (one object, or
one per line with --append-result) and SGLang `bench_serving --output-file` JSONL (which may hold
the bare token `Infinity`). Per-request arrays are zipped into one row per request.

Nothing is guessed: a point whose figures hold NaN, an infinity (other than `request_rate`, where
it means "all at once"), a string or a list where a number belongs is left out with an error; a
point whose per-request arrays differ in length or hold such values keeps its row but none of its
requests, with an error naming the array (no median is ever taken of what happened to parse).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from stages.core.numbers import loose_float, loose_int
from stages.formats.lines import ParseError, decode
from stages.ingest.parsers.bench_objects import objects_at

POINT_COLUMNS = (
    "backend", "date", "model_id", "num_prompts", "request_rate", "max_concurrency", "duration_s",
    "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
    "output_throughput", "total_token_throughput",
    "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "mean_e2el_ms", "median_e2el_ms",
)
_RENAMED = {"duration": "duration_s"}
_TEXT = {"backend", "date", "model_id"}
_INTS = {"num_prompts", "max_concurrency", "completed", "failed", "total_input_tokens",
         "total_output_tokens"}
# Older SGLang names for the same figures.
_ALIASES = {
    "mean_e2e_latency_ms": "mean_e2el_ms", "median_e2e_latency_ms": "median_e2el_ms",
    "total_input": "total_input_tokens",
    "total_output": "total_output_tokens",
}
ARRAYS = ("input_lens", "output_lens", "ttfts", "latencies", "itls", "start_times",
          "queue_times", "errors", "generated_texts")
_NUMBER_ARRAYS = ("input_lens", "output_lens", "ttfts", "latencies", "start_times", "queue_times")
_INFINITE_OK = {"request_rate"}
_NUMBER_TYPES = {int, float, type(None)}
_INFINITY_WORDS = {"inf", "+inf", "infinity", "+infinity"}
# `<workload>__c<NN>`, with `__r<R>` after it for one run of a repeated point.
_POINT_NAME = re.compile(r"^(?P<workload>.+?)__c(?P<concurrency>\d+)(?:__r(?P<repeat>\d+))?$")
# Keys only SGLang's bench_serving writes; its `concurrency` is the average measured in flight,
# not a --metadata setting, and is kept as `measured_concurrency`.
_SGLANG_KEYS = {"server_info", "total_output_tokens_retokenized", "accept_length"}


@dataclass
class BenchParse:
    points: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ParseError] = field(default_factory=list)


def not_a_number(value: Any, infinite_ok: bool = False) -> str | None:
    """What `value` is, where a number (or null) belongs and it is not one; None when it is."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        if math.isnan(value):
            return "NaN"
        return None if math.isfinite(value) or infinite_ok else "infinite"
    if isinstance(value, str):
        return None if infinite_ok and value.strip().lower() in _INFINITY_WORDS else "a string"
    return "a list" if isinstance(value, list) else "an object"


def _scalar_for_json(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def split_point_id(point_id: str) -> tuple[str | None, int | None, int | None]:
    """`long__c04` -> ("long", 4, None); `long__c04__r2` -> ("long", 4, 2)."""
    m = _POINT_NAME.match(point_id)
    if not m:
        return None, None, None
    repeat = m.group("repeat")
    return m.group("workload"), int(m.group("concurrency")), int(repeat) if repeat else None


def point_of(obj: dict[str, Any], point_id: str, line: int, file_stem: str | None = None,
             key_lines: dict[str, int] | None = None) -> tuple[dict[str, Any], list[str]]:
    """One raw_bench_points row (without run_id / source_file) from a result object, and what
    in it is not a number where one belongs (the row is not to be used when there is any).

    workload and concurrency come from the --metadata keys, else from the file name
    (`<workload>__c<NN>`), else from max_concurrency. repeat (which run of a repeated point)
    comes from the `repeat` metadata key, else from the file name (`<workload>__c<NN>__r<R>`),
    else is 1: a file written before points were repeated is the point's one run.

    `key_lines` ({key: line of its value}, of an object printed over several lines) gives
    `value_lines`: the line of each column's value where it is not the object's first line
    (JSON, {column: line}), so that a figure cites the line that holds it."""
    row: dict[str, Any] = {"point_id": point_id, "source_line": line}
    key_lines = key_lines or {}
    lines: dict[str, int] = {}
    extra: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in obj.items():
        name = key.rstrip(":").strip()  # an old release wrote "request_goodput:"
        name = _RENAMED.get(name, name)
        alias = _ALIASES.get(name)
        if alias and alias not in obj:
            name = alias
        numeric = name in POINT_COLUMNS and name not in _TEXT
        if numeric and name not in row:
            problem = not_a_number(value, infinite_ok=name in _INFINITE_OK)
            if problem:
                problems.append(f"{name} is {problem}")
                continue
        if isinstance(value, (list, dict)):
            continue
        if name in POINT_COLUMNS and name not in row:
            if key_lines.get(key, line) != line:
                lines[name] = key_lines[key]
            if name in _TEXT:
                row[name] = None if value is None else str(value)
            elif name in _INTS:
                row[name] = loose_int(value)
            else:
                row[name] = loose_float(value)
        else:
            extra[name] = _scalar_for_json(value)
    if _SGLANG_KEYS & obj.keys() and "concurrency" in extra:
        extra["measured_concurrency"] = extra.pop("concurrency")
    _complete_counts(row, extra)
    workload, concurrency, repeat = split_point_id(file_stem or point_id)
    meta_workload = extra.get("workload")
    meta_concurrency = loose_int(extra.get("concurrency"))
    row["workload"] = str(meta_workload) if meta_workload not in (None, "") else workload
    row["concurrency"] = (meta_concurrency if meta_concurrency is not None
                          else concurrency if concurrency is not None
                          else row.get("max_concurrency"))
    given = ("concurrency" if meta_concurrency is not None
             else None if concurrency is not None else "max_concurrency")
    if given and key_lines.get(given, line) != line:
        lines["concurrency"] = key_lines[given]
    row["value_lines"] = json.dumps(lines, sort_keys=True) if lines else None
    meta_repeat = loose_int(extra.get("repeat"))
    row["repeat"] = (meta_repeat if meta_repeat is not None and meta_repeat > 0
                     else repeat if repeat else 1)
    row["metadata_json"] = json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None
    return row, problems


def _complete_counts(row: dict[str, Any], extra: dict[str, Any]) -> None:
    """Fill `failed` where the tool sent num_prompts requests and counted only the completed ones
    (benchmark_serving.py before `failed` was written): failed = num_prompts - completed, noted
    in the metadata as `failed_from`. SGLang's bench_serving writes neither num_prompts nor failed:
    both stay null."""
    sent, completed = row.get("num_prompts"), row.get("completed")
    if row.get("failed") is None and sent is not None and completed is not None and completed <= sent:
        row["failed"] = sent - completed
        extra["failed_from"] = "num_prompts - completed"


def _itl_totals(itl: Any) -> tuple[int | None, float | None]:
    """(count, sum) of one request's inter-token latencies (checked by `_array_problem`)."""
    if not isinstance(itl, list):
        return None, None
    return len(itl), float(sum(itl))


def _array_problem(arrays: dict[str, Any]) -> str | None:
    """Why the per-request arrays cannot be zipped: one is not a list, their lengths differ, or
    one holds something other than a number (or null) where numbers belong."""
    bad = sorted(name for name, values in arrays.items() if not isinstance(values, list))
    if bad:
        return f"{bad[0]} is {not_a_number(arrays[bad[0]]) or 'a number'}, not a list"
    lengths = {name: len(values) for name, values in arrays.items()}
    if len(set(lengths.values())) > 1:
        sizes = ", ".join(f"{k}={v}" for k, v in sorted(lengths.items()))
        return f"per-request arrays differ in length ({sizes})"
    for name in _NUMBER_ARRAYS:
        found = _first_not_a_number(arrays.get(name, ()))
        if found:
            return f"{name}[{found[0]}] is {found[1]} where a number belongs"
    for i, itl in enumerate(arrays.get("itls", ())):
        if itl is not None and not isinstance(itl, list):
            return f"itls[{i}] is {not_a_number(itl) or 'a number'}, not a list"
        found = _first_not_a_number(itl or ())
        if found:
            return f"itls[{i}] holds {found[1]} where a number belongs"
    return None


def _first_not_a_number(values: list[Any]) -> tuple[int, str] | None:
    """(index, what it is) of the first value that is neither a finite number nor null. Arrays
    of finite numbers, the usual case, are passed over at C speed (types, then their sum)."""
    types = set(map(type, values))
    if types <= _NUMBER_TYPES:
        try:
            total = sum(values) if type(None) not in types else sum(v for v in values if v is not None)
        except OverflowError:
            total = math.inf
        if math.isfinite(total):
            return None
    return next(((i, p) for i, p in enumerate(map(not_a_number, values)) if p), None)


def requests_of(obj: dict[str, Any], point_id: str, line: int) -> tuple[list[dict], list[ParseError]]:
    """Per-request rows from --save-detailed arrays, zipped by index; none at all, with an error,
    when the arrays cannot be zipped as they are."""
    arrays = {name: obj[name] for name in ARRAYS if obj.get(name) is not None}
    if not arrays:
        return [], []
    problem = _array_problem(arrays)
    if problem:
        return [], [ParseError(line, f"{point_id}: {problem}; its requests are left out")]
    n = len(next(iter(arrays.values())))

    def at(name: str, i: int) -> Any:
        values = arrays.get(name)
        return None if values is None else values[i]

    rows = []
    for i in range(n):
        itl = at("itls", i)
        itl_count, itl_sum = _itl_totals(itl)
        error = at("errors", i)
        text = at("generated_texts", i)
        rows.append({
            "point_id": point_id,
            "request_idx": i,
            "input_tokens": loose_int(at("input_lens", i)),
            "output_tokens": loose_int(at("output_lens", i)),
            "ttft_s": loose_float(at("ttfts", i)),
            "latency_s": loose_float(at("latencies", i)),
            "itl_count": itl_count,
            "itl_sum_s": itl_sum,
            "start_time_s": loose_float(at("start_times", i)),
            "queue_time_s": loose_float(at("queue_times", i)),
            "error": None if error is None else str(error),
            "generated_text": None if text is None else str(text).replace("\x00", ""),
            "source_line": line,
        })
    return rows, []


# Keys by which a result object is one of vLLM's or SGLang's (any release): a figure, a per-request
# array, or a setting only their result files hold.
_SHAPE_KEYS = frozenset({*POINT_COLUMNS, *_RENAMED, *_ALIASES, *ARRAYS, *_SGLANG_KEYS, "request_goodput:"})


def recognise(data: bytes) -> bool:
    """The file is a result of `vllm bench serve` (or benchmark_serving.py) or SGLang's
    bench_serving: its object (or its first JSON line, or the first object of its list) holds a
    key only those write; or, where it is not valid JSON (cut short, damaged), its text names one
    (parse_bench then says what is wrong with it). Anything else in bench/ is left to the other
    tools' readers, or reported as unrecognised."""
    text = decode(data[:1 << 20]).strip()
    for candidate in (text, text.split("\n", 1)[0]):
        try:
            obj = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, list) and obj and isinstance(obj[0], dict):
            obj = obj[0]
        return isinstance(obj, dict) and bool(_SHAPE_KEYS & obj.keys())
    return text[:1] in ("{", "[") and any(f'"{key}"' in text for key in _SHAPE_KEYS)


def parse_bench(data: bytes, point_id: str) -> BenchParse:
    """Points, per-request rows and errors of one result file named `point_id` (its stem)."""
    result = BenchParse()
    objects, errors, spread = objects_at(decode(data))
    result.errors.extend(errors)
    for n, ((line, obj), lines) in enumerate(zip(objects, spread)):
        pid = point_id if len(objects) == 1 else f"{point_id}#{n + 1}"
        point, problems = point_of(obj, pid, line, point_id, lines)
        if problems:
            result.errors.append(ParseError(line, f"{pid}: {', '.join(problems)} where a number "
                                                  "belongs; the point is left out"))
            continue
        result.points.append(point)
        rows, row_errors = requests_of(obj, pid, line)
        result.requests.extend(rows)
        result.errors.extend(row_errors)
    return result

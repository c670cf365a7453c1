"""What the benchmark tools' parsers share: the point a result becomes, units converted once,
JSON paths written one way, and the rows' shapes (bench_json's BenchParse).

A point row holds the raw_bench_points columns (bench_json.POINT_COLUMNS, in their units: times in
milliseconds for *_ms, seconds for duration_s, tokens per second for the throughputs), plus
`point_id`, `workload`, `concurrency`, `repeat`, `source_line`, `metadata_json` (the tool's other
settings), `tool`, `tool_version` and `summary_paths`: a JSON object naming, for each figure read
from the tool's own summary, the JSON path (or CSV cell) in the file it came from.

A request row holds the raw_bench_requests columns (ttft_s, latency_s, input_tokens,
output_tokens, itl_count, itl_sum_s, start_time_s, error, ...; seconds), plus `tpot_ms` (the
request's time per output token as the tool recorded it, inter-token latency included, in ms;
null where latency and output tokens give it), `record_path` (the JSON path of the request's
record in the file, such as `[3]` or `benchmarks[0].requests.successful[3]`; null for a JSON line,
whose source_line names it) and `field_paths` (a JSON object: column -> the path inside the record,
such as {"ttft_s": "time_to_first_token_ms"}).
"""
from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any, Callable, Iterable, Iterator

from stages.core.numbers import finite  # noqa: F401 (re-exported: the tools' parsers read common.finite)
from stages.ingest.parsers.bench_json import BenchParse, split_point_id  # noqa: F401 (re-exported)
from stages.formats.lines import JsonProblem, ParseError, decode, read_json_object  # noqa: F401 (ParseError re-exported)

# Seconds in one unit of time, as the tools write their units.
SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "secs": 1.0,
           "second": 1.0, "seconds": 1.0, "min": 60.0}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def seconds(value: Any, unit: str) -> float | None:
    """`value` in `unit` (ns, us, ms, s, ...) as seconds; None for a value that is not a finite
    number. An unknown unit is a ValueError: the parser must not guess."""
    number = finite(value)
    if number is None:
        return None
    key = unit.strip().lower()
    if key not in SECONDS:
        raise ValueError(f"unknown time unit {unit!r}")
    return number * SECONDS[key]


def millis(value: Any, unit: str) -> float | None:
    """`value` in `unit` as milliseconds (the *_ms columns)."""
    got = seconds(value, unit)
    return None if got is None else got * 1000.0


def path(*parts: str | int) -> str:
    """A JSON path as the audit pages print it: path("benchmarks", 0, "metrics", "x-y") ->
    'benchmarks[0].metrics["x-y"]'."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENT.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def point_id(name: str, concurrency: int | None, index: int | None = None) -> str:
    """The point id of a result read from file `name`: its stem when the stem already names a
    point (`<workload>__c<NN>`, as the run stage writes them), else `<stem>__c<NN>` from the
    concurrency the file states (`<stem>__i<N>` for a point with none, such as a fixed request
    rate, N its position in the file, from 1)."""
    stem = PurePosixPath(name).name.split(".", 1)[0]
    if split_point_id(stem)[0] is not None:
        return stem
    if concurrency is not None:
        return f"{stem}__c{concurrency:02d}"
    return f"{stem}__i{index or 1}"


def dig(obj: Any, parts: Iterable[str | int]) -> Any:
    """The value at `parts` inside a JSON document (keys of objects, indexes of lists), or None
    where the path leads nowhere."""
    for part in parts:
        if isinstance(obj, dict) and isinstance(part, str):
            obj = obj.get(part)
        elif isinstance(obj, list) and isinstance(part, int) and -len(obj) <= part < len(obj):
            obj = obj[part]
        else:
            return None
    return obj


def load_json(text: str, invalid: str, consequence: str) -> tuple[dict[str, Any] | None, ParseError | None]:
    """The JSON object `text` holds (the raw files' one rule, formats.lines.read_json_object), or
    the error that stops it being read, which says `<invalid>: <what is wrong> (line L column C);
    <consequence>`, or `not a JSON object; <consequence>` for another JSON value."""
    obj = read_json_object(text)
    if not isinstance(obj, JsonProblem):
        return obj, None
    if not obj.syntax:
        return None, ParseError(obj.line, f"{obj.reason}; {consequence}")
    return None, ParseError(obj.line, f"{invalid}: {obj.detail} (line {obj.line} column {obj.column}); "
                                      f"{consequence}")


def json_lines(text: str) -> Iterator[tuple[int, Any, ParseError | None]]:
    """(line number, value, None) for each line of a JSON-lines text that holds something, or
    (line number, None, the error) for one that is not valid JSON."""
    for line_no, raw in enumerate(text.split("\n"), start=1):
        if raw.strip():
            try:
                yield line_no, json.loads(raw), None
            except json.JSONDecodeError as exc:
                yield line_no, None, ParseError(line_no, f"not valid JSON: {exc.msg} (column {exc.colno})")


def read_json(data: bytes, empty: str, invalid: str, consequence: str
              ) -> tuple[str, dict[str, Any] | None, ParseError | None]:
    """A whole file's text and the JSON object it holds, or the error that stops it being read:
    `empty` for a file of nothing but white space, else as load_json says."""
    text = decode(data)
    if not text.strip():
        return text, None, ParseError(1, empty)
    obj, error = load_json(text, invalid, consequence)
    return text, obj, error


def paths_json(paths: dict[str, str]) -> str | None:
    """summary_paths / field_paths as stored: a JSON object, keys sorted; None when empty."""
    return json.dumps(paths, sort_keys=True) if paths else None


class Siblings(frozenset):
    """The names of the other files beside a result file (a frozenset of their paths in the run
    folder), whose bytes `read` gives: a per-request file whose records do not say their point can
    take it from the summary beside it. `read` returns None for a name not among them or one that
    cannot be read."""

    def __new__(cls, names=(), reader: Callable[[str], bytes] | None = None):
        made = super().__new__(cls, names)
        made._reader = reader
        return made

    def read(self, name: str) -> bytes | None:
        if name not in self or self._reader is None:
            return None
        try:
            return self._reader(name)
        except Exception:  # noqa: BLE001 - an unreadable sibling is reported where it is read
            return None


# A point made from a per-request file kept alone (no summary of the tool beside it): what
# metadata_json says of where its figures come from.
FROM_REQUESTS = "requests"


def point_from_requests(pid: str, rows: list[dict[str, Any]], *, tool: str, line: int,
                        concurrency: int | None, concurrency_from: str | None,
                        request_rate: float | None = None, rate_from: str | None = None,
                        tool_version: str | None = None,
                        settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The point of a per-request file read with no summary of its tool beside it (people often
    keep only that file): its counts are its records (sent: every record; completed: those
    without an error; failed: those with one), its throughput the successful requests' output
    tokens over the first start to the last end where every successful record has a start and a
    latency, and its time to first token and per-token figures are left to derive, which computes
    them from the successful requests (bench_points.figures_from 'requests'). Nothing of the tool's
    own summary is in it: summary_paths stays null, and metadata_json says `figures_from`
    'requests', how each figure set here was computed, and where the concurrency and the rate
    came from, or that the records do not say them (`concurrency`: 'unknown')."""
    ok = [r for r in rows if not r.get("error")]
    computed = {"num_prompts": "count of the request records",
                "completed": "count of the records without an error",
                "failed": "count of the records with an error"}
    point: dict[str, Any] = {
        "point_id": pid, "concurrency": concurrency, "repeat": 1, "source_line": line,
        "num_prompts": len(rows), "completed": len(ok), "failed": len(rows) - len(ok),
        "tool": tool, "tool_version": tool_version, "summary_paths": None,
    }
    workload, named, repeat = split_point_id(pid)
    if workload is not None:
        point["workload"] = workload
        point["repeat"] = repeat or 1
        if named is not None:
            point["concurrency"] = named
    if point["concurrency"] is not None:
        point["max_concurrency"] = point["concurrency"]
    if request_rate is not None:
        point["request_rate"] = request_rate
    spans = [(r.get("start_time_s"), r.get("latency_s")) for r in ok]
    if ok and all(s is not None and d is not None for s, d in spans) \
            and all(r.get("output_tokens") is not None for r in ok):
        duration = max(s + d for s, d in spans) - min(s for s, _ in spans)
        if duration > 0:
            outputs = sum(r["output_tokens"] for r in ok)
            point.update(duration_s=duration, total_output_tokens=outputs,
                         output_throughput=outputs / duration, request_throughput=len(ok) / duration)
            computed.update(
                duration_s="last end (start + latency) less first start of the successful requests",
                total_output_tokens="sum of the successful requests' output tokens",
                output_throughput="total_output_tokens / duration_s",
                request_throughput="completed / duration_s")
    meta: dict[str, Any] = dict(settings or {})
    meta.update(figures_from=FROM_REQUESTS, computed_from_requests=computed,
                concurrency=("unknown: the records do not state it, nor does the file's name"
                             if point["concurrency"] is None else point["concurrency"]),
                concurrency_from=(None if point["concurrency"] is None
                                  else concurrency_from or "the point's name"))
    if request_rate is not None:
        meta["request_rate_from"] = rate_from
    point["metadata_json"] = json.dumps({k: v for k, v in meta.items() if v is not None},
                                        sort_keys=True, ensure_ascii=False)
    return point

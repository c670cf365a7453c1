"""AIPerf's per-request records (profile_export.jsonl, one JSON line per request): the profiling
phase's requests, all or nothing, meeting their summary's point."""
from __future__ import annotations

from typing import Any

from stages.formats.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.aiperf.files import (
    TOOL, beside, folder_concurrency, is_record, names_point, plain_path, point_source, stem_of, summary_stem_of)
from stages.ingest.parsers.tools.aiperf.summary import not_finite, parse_summary
from stages.ingest.parsers.tools.common import BenchParse, ParseError


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
# Per-request records (profile_export.jsonl)


def _summary_point(name: str, summary_stem: str, siblings: frozenset[str]) -> str | None:
    """The point id of the summary JSON beside per-request file `name`, read through
    `siblings` (common.Siblings); None where there is none or it gives no one point."""
    read = getattr(siblings, "read", None)
    path = str(plain_path(name).with_name(f"{summary_stem}.json"))
    data = None
    for candidate in (path, path + ".gz"):
        data = read(candidate) if read is not None else None
        if data is not None:
            path = candidate
            break
    if data is None:
        return None
    points = parse_summary(path, data).points
    return points[0]["point_id"] if len(points) == 1 else None


def parse_records(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """One request row per JSON line of the profiling phase, in file order. Like vLLM's arrays,
    the requests are all or nothing: a line that is not a record, or a figure that is not a finite
    number, leaves every request of the file out, with an error naming each such line."""
    result = BenchParse()
    summary_stem = summary_stem_of(name)
    point_name = point_source(name, summary_stem)
    concurrency = folder_concurrency(name)
    pid = common.point_id(point_name, concurrency)
    from_summary = _summary_point(name, summary_stem, siblings)
    if from_summary is not None:
        pid = from_summary
    elif (concurrency is None and not names_point(stem_of(plain_path(point_name)))
            and beside(name, siblings, f"{summary_stem}.json")):
        result.errors.append(ParseError(1, f"{pid}: the point's concurrency is stated only inside "
                                           f"{summary_stem}.json, which no name here repeats (the "
                                           "file's, its folder's); the requests meet that summary's "
                                           "point only where it states no concurrency"))
    rows: list[dict[str, Any]] = []
    bad: list[ParseError] = []
    for line_no, obj, invalid in common.json_lines(decode(data)):
        if invalid is not None or not isinstance(obj, dict) or not is_record(obj):
            bad.append(invalid or ParseError(line_no, "not an AIPerf request record (metadata and metrics)"))
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
    if rows and not _summary_beside(name, summary_stem, siblings):
        result.points.append(common.point_from_requests(
            pid, rows, tool=TOOL, line=rows[0]["source_line"], concurrency=concurrency,
            concurrency_from="the folder's name (AIPerf's artifact folder, -concurrency<N>)",
            settings={"point_from": f"{plain_path(name).name} alone: no "
                                    f"{summary_stem}.json or .csv beside it"}))
    return result


def _summary_beside(name: str, summary_stem: str, siblings: frozenset[str]) -> bool:
    """Whether AIPerf's summary of the same run (JSON or its CSV export, gzipped or not) is beside
    per-request file `name`: then that summary gives the point and the records only meet it."""
    return any(beside(name, siblings, f"{summary_stem}.{ext}") for ext in ("json", "csv"))


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
        problem = not_finite(value)
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
            problems.append(f"{where} is {not_finite(values) or 'a number'}, not a list")
        elif any(not_finite(v) for v in values):
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
        if not_finite(start):
            problems.append(f"metadata.{key} is {not_finite(start)} where a number belongs")
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

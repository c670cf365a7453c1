"""inference-perf's per-request reports: a JSON array of request records (their times, tokens and
errors), each row's line where its record starts, tied to the point of the one stage report beside
them when the file's name names none."""
from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any

from stages.formats.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError
from stages.ingest.parsers.tools.inference_perf.lifecycle import (
    ADAPTER_STAGE_NAME, STAGE_NAME, TOOL, read_report, what_is)


_WS = re.compile(r"[ \t\n\r]*")
_NONE = object()


# Per-request record fields, newest layout first: v0.6.0 on (request_metrics / response_metrics),
# v0.5.0 (response_info), v0.1.1 - v0.4.0 (flat info). v0.1.0 records have no info at all.
_INPUT_TOKENS = (("info", "request_metrics", "text", "input_tokens"), ("info", "input_tokens"))
_OUTPUT_TOKENS = (("info", "response_metrics", "output_tokens"), ("info", "response_info", "output_tokens"),
                  ("info", "output_tokens"))
_TOKEN_TIMES = (("info", "response_metrics", "output_token_times"),
                ("info", "response_info", "output_token_times"), ("info", "output_token_times"))
_RECORD_KEYS = {"start_time", "end_time", "request", "error"}


# ---------------------------------------------------------------- per-request reports

def read_requests(name: str, text: str, line: int, siblings: frozenset[str]) -> BenchParse:
    records, errors = _array(text)
    if errors:
        return BenchParse(errors=errors)
    if not records:
        return BenchParse()
    result = BenchParse()
    point_id, alone = _requests_point(name, line, siblings, result.errors)
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
    if alone and result.requests and not result.errors:
        # kept without its stage report (people often keep only this file): the point from its
        # records; inference-perf's records hold neither the concurrency nor the request rate
        result.points.append(common.point_from_requests(
            point_id, result.requests, tool=TOOL, line=result.requests[0]["source_line"],
            concurrency=None, concurrency_from=None,
            settings={"point_from": f"{PurePosixPath(name).name} alone: no stage report of the run beside it"}))
    return result


def _requests_point(name: str, line: int, siblings: frozenset[str], errors: list[ParseError]) -> tuple[str, bool]:
    """The point the requests belong to, and whether they are alone (no stage report beside
    them: their point is made from them): the one the file's name names, else that of the one
    stage report beside them (read through common.Siblings), else, beside several, one of their
    own (with an error: the records cannot be tied to a stage)."""
    stages = sorted(s for s in siblings if STAGE_NAME.search(PurePosixPath(s).name)
                    and not ADAPTER_STAGE_NAME.search(PurePosixPath(s).name))
    stem = PurePosixPath(name).name.split(".", 1)[0]
    if common.split_point_id(stem)[0] is not None:
        return stem, not stages
    point_id = common.point_id(name, None, 1)
    if not stages:
        return point_id, True
    read = getattr(siblings, "read", None)
    if len(stages) == 1 and read is not None:      # the one stage beside them: its point
        data = read(stages[0])
        points = read_report(stages[0], decode(data)).points if data is not None else []
        if len(points) == 1:
            return points[0]["point_id"], False
    where = (f"; they all belong to {PurePosixPath(stages[0]).name}, the only stage report beside it"
             if len(stages) == 1 else "")
    errors.append(ParseError(line, f"{point_id}: inference-perf's per-request records name no stage, and the "
                                   f"file's name names no point (<workload>__cNN), so its requests are kept "
                                   f"under {point_id}, which no stage report's point meets{where}"))
    return point_id, False


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
        value = common.dig(rec, parts)
        if value is None:
            return None
        got = common.finite(value)
        if got is None:
            problems.append(f"{common.path(*parts)} is {what_is(value)}")
        return got

    start, end = number(("start_time",)), number(("end_time",))
    if start is not None:
        row["start_time_s"] = start
        fields["start_time_s"] = "start_time"
    if start is not None and end is not None:
        row["latency_s"] = end - start
        fields["latency_s"] = "end_time - start_time"
    for column, candidates in (("input_tokens", _INPUT_TOKENS), ("output_tokens", _OUTPUT_TOKENS)):
        parts = next((p for p in candidates if common.dig(rec, p) is not None), None)
        if parts is None:
            continue
        got = number(parts)
        if got is not None and got.is_integer() and got >= 0:
            row[column] = int(got)
            fields[column] = common.path(*parts)
        elif got is not None:
            problems.append(f"{common.path(*parts)} is {got!r}, not a token count")
    parts = next((p for p in _TOKEN_TIMES if common.dig(rec, p) is not None), None)
    if parts is not None:
        times = common.dig(rec, parts)
        where = common.path(*parts)
        bad = next((t for t in times if common.finite(t) is None), _NONE) if isinstance(times, list) else times
        if bad is not _NONE:
            problems.append(f"{where} is {what_is(times)}" if not isinstance(times, list)
                            else f"{where} holds {what_is(bad)}")
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

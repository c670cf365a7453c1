"""LLMPerf's per-request records (`<run>_individual_responses.json`, a JSON list): one request row
each, its error as the record states it, each row's line where its record starts."""
from __future__ import annotations

from typing import Any

from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import ParseError
from stages.ingest.parsers.tools.llmperf.values import (
    finite_number, record_lines, run_point_id, what_is)
from stages.ingest.parsers.tools.llmperf.summary import TPOT_KEYS


# Request columns: (column, the record's key, kind: a count or seconds).
_REQUEST_FIELDS = (
    ("input_tokens", "number_input_tokens", "int"),
    ("output_tokens", "number_output_tokens", "int"),
    ("ttft_s", "ttft_s", "s"),
    ("latency_s", "end_to_end_latency_s", "s"),
    ("start_time_s", "start_time", "s"),     # Unix seconds (the 2025-10-14 fork)
)
_TEXT_KEYS = ("generated_text", "GEN_TEXT")


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


def request_rows(records: list[Any], text: str, name: str) -> tuple[list[dict[str, Any]],
                                                                   list[ParseError]]:
    pid = run_point_id(name)
    lines = record_lines(text, len(records))
    rows: list[dict[str, Any]] = []
    errors: list[ParseError] = []
    tpot_key = next((k for k, _ in TPOT_KEYS
                     if any(isinstance(r, dict) and k in r for r in records)), None)
    for idx, (record, line) in enumerate(zip(records, lines)):
        if not isinstance(record, dict):
            errors.append(ParseError(line, f"{pid}: record [{idx}] is {what_is(record)}, not a "
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
            number = finite_number(value)
            if number is None or (kind == "int" and number != int(number)):
                if value is not None:
                    bad.append(f"{key} is {what_is(value) if number is None else repr(value)}")
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

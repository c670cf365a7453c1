"""The per-request rows of a GuideLLM benchmark from 0.2 on (requests.successful / errored /
incomplete), kept only when they are the requests its summary counts: from 0.4 on by the tool's
own window rule, which leaves the warm-up and cool-down requests out."""
from __future__ import annotations

from typing import Any

from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import ParseError
from stages.ingest.parsers.tools.guidellm.document import Lines
from stages.ingest.parsers.tools.guidellm.figures import in_column_unit, what


_STATUSES = ("successful", "errored", "incomplete")


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


def request_rows(entry: dict[str, Any], i: int, pid: str, totals: dict[str, Any], lines: Lines,
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
                return [], [ParseError(line, f"{pid}: {common.path(*base, status, j)} is {what(record)}, "
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
    window = (common.finite(common.dig(entry, ("scheduler_metrics", "measure_start_time"))),
              common.finite(common.dig(entry, ("scheduler_metrics", "measure_end_time"))))
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
                value = common.dig(record, at)
                if value is None:
                    continue
                number = common.finite(value)
                if number is None or (whole and not number.is_integer()):
                    return [], [ParseError(line, f"{pid}: {common.path(*where, *at)} is "
                                                 f"{what(value) if number is None else repr(value)} "
                                                 "where a number belongs; its requests are left out")], {}
                row[column] = int(number) if whole else in_column_unit(number, column, unit)
                paths[column] = common.path(*at)
            if row.get("output_tokens") is None or row["output_tokens"] < 2:
                row.pop("tpot_ms", None)          # no gap between tokens: the tool writes 0 or null
                paths.pop("tpot_ms", None)
            if status != "successful":
                message = common.dig(record, error_at)
                if isinstance(message, str) and message:
                    row["error"] = message
                    paths["error"] = common.path(*error_at)
                else:
                    state = common.dig(record, ("info", "status"))
                    row["error"] = status if not isinstance(state, str) else f"{status} ({state})"
            row["field_paths"] = common.paths_json(paths)
            rows.append(row)
    return rows, [], note

"""GenAI-Perf's summary CSV (`*_genai_perf.csv`): the request-metrics table (its header by release),
then the single figures (`Metric,Value`); read only where the summary JSON is not beside it."""
from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import PurePosixPath
from typing import Any

from stages.formats.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError
from stages.ingest.parsers.tools.genai_perf.names import (
    base_names, plain_name, point_fields, point_name, stored_fields, to_ms)
from stages.ingest.parsers.tools.genai_perf.summary import E2EL, ITL, RATE_UNITS, TPOT, TTFT


# The request-metrics table's header, by release.
CSV_HEADERS = {
    ("Statistic", "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25"): "0.0.1",
    ("Metric", "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25"): "0.0.2-0.0.14",
    ("Metric", "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25", "p10", "p5", "p1"):
        "0.0.15+",
}
_CSV_VALUE_HEADER = ("Metric", "Value")
_CSV_LABEL = re.compile(r"^\s*(?P<name>[A-Za-z][A-Za-z0-9 _]*?)\s*(?:\((?P<unit>[^()]*)\))?\s*$")


# ---------------------------------------------------------------- summary CSV

def parse_csv(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    result = BenchParse()
    json_name = PurePosixPath(plain_name(name)).with_suffix(".json").name
    if json_name in base_names(siblings):
        return result          # the summary JSON beside it gives this point
    text = decode(data).lstrip("\ufeff")
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        result.errors.append(ParseError(1, f"not a readable CSV: {exc}; no point read"))
        return result
    header = tuple(c.strip() for c in rows[0]) if rows else ()
    release = CSV_HEADERS.get(header)
    if release is None:
        result.errors.append(ParseError(1, "not a GenAI-Perf summary CSV header; no point read"))
        return result
    stats = header[1:]
    pid = common.point_id(point_name(name), None, 1)
    row: dict[str, Any] = {**point_fields(pid), "source_line": 1}
    paths: dict[str, str] = {}
    extra: dict[str, Any] = {}
    problems: list[str] = []
    ns_rows = seen_rate = False
    table = "stats"
    for number, cells in enumerate(rows[1:], start=2):
        cells = [c.strip() for c in cells]
        if not any(cells):
            table = "next"
            continue
        if table == "next":
            table = "values" if tuple(cells) == _CSV_VALUE_HEADER else "other"
            continue
        if table == "other":
            continue                    # GPU telemetry
        label = _CSV_LABEL.match(cells[0])
        if not label:
            continue
        metric = label.group("name").strip().lower().replace(" ", "_")
        unit = (label.group("unit") or "").strip()
        ns_rows = ns_rows or unit == "ns"
        if len(cells) == 2:             # a value row (0.0.1 writes them in its one table)
            seen_rate = seen_rate or metric == "request_throughput"
            _csv_value(metric, unit, cells[1], number, cells[0], row, paths, extra, problems)
        elif table == "stats" and len(cells) != len(header):
            problems.append(f"line {number} has {len(cells)} cells, its header {len(header)}")
        elif table == "stats":
            _csv_stats(metric, unit, cells, stats, number, release, row, paths, extra, problems)
    if not seen_rate:
        problems.append("no Request Throughput row (the file is cut short)")
    if problems:
        result.errors.append(ParseError(1, f"{pid}: {', '.join(problems)}; the point is left out"))
        return result
    if release == "0.0.1":
        extra["format"] = "genai-perf 0.0.1 summary CSV (ns)"
    elif release == "0.0.15+":
        extra["format"] = "genai-perf 0.0.15+ summary CSV (ms)"
    else:
        extra["format"] = (f"genai-perf {'0.0.2-0.0.3' if ns_rows else '0.0.4-0.0.14'} summary CSV "
                           f"({'ns' if ns_rows else 'ms'})")
    if ns_rows and release != "0.0.1" and "itl_figures_ms" in extra:
        extra["itl_left_out"] = ("a CSV in ns is written by 0.0.2 (inter_token_latency over every "
                                 "response gap) or 0.0.3 (per request, a TPOT): not told apart")
    row.update(stored_fields(extra, paths))
    result.points.append(row)
    return result


def _cell(value: str) -> tuple[float | None, str | None]:
    """A CSV cell as a number: (value, None), (None, None) where the tool wrote none (`N/A`, or
    0.0.1 – 0.0.3's -1 for a figure it did not have), (None, what it is) otherwise."""
    if value in ("", "N/A"):
        return None, None
    try:
        number = float(value.replace(",", ""))
    except ValueError:
        return None, "a string"
    if not math.isfinite(number):
        return None, "NaN" if math.isnan(number) else "infinite"
    return number, None


def _cell_path(line: int, label: str, stat: str) -> str:
    return f"line {line} {json.dumps(label)} {stat}"


def _csv_stats(metric: str, unit: str, cells: list[str], stats: tuple[str, ...], line: int,
               release: str, row: dict, paths: dict, extra: dict, problems: list[str]) -> None:
    if metric == "time_to_first_token":
        columns = TTFT
    elif metric == "request_latency":
        columns = E2EL
    elif metric == "inter_token_latency":
        columns = ITL if release == "0.0.1" else TPOT if unit != "ns" else None
    else:
        columns = None
    values = dict(zip(stats, cells[1:]))
    if columns is None:
        figures = {}
        for stat in ("avg", "p50"):
            number, _ = _cell(values.get(stat, ""))
            if number is not None and number >= 0:
                figures[stat] = number
        if metric == "inter_token_latency" and figures:
            extra["itl_figures_ms"] = {k: to_ms(v, "ns") for k, v in figures.items()}
        key = {"output_sequence_length": "mean_output_tokens", "num_output_token": "mean_output_tokens",
               "input_sequence_length": "mean_input_tokens", "num_input_token": "mean_input_tokens",
               "time_to_second_token": "mean_ttst_ms"}.get(metric)
        if key and "avg" in figures:
            extra[key] = figures["avg"]
        return
    for stat, column in columns.items():
        number, problem = _cell(values.get(stat, ""))
        if problem:
            problems.append(f"{_cell_path(line, cells[0], stat)} is {problem} where a number belongs")
            continue
        if number is None or (unit == "ns" and number < 0):
            continue
        try:
            row[column] = to_ms(number, unit)
        except ValueError:
            problems.append(f"line {line} {json.dumps(cells[0])} is in {unit!r}, not a unit of time")
            return
        paths[column] = _cell_path(line, cells[0], stat)


def _csv_value(metric: str, unit: str, value: str, line: int, label: str, row: dict, paths: dict,
               extra: dict, problems: list[str]) -> None:
    column = {"request_throughput": "request_throughput",
              "output_token_throughput": "output_throughput", "request_count": "completed"}.get(metric)
    number, problem = _cell(value)
    if column is None:
        if number is not None and metric == "request_goodput":
            extra["request_goodput"] = number
        return
    if problem:
        problems.append(f"{_cell_path(line, label, 'Value')} is {problem} where a number belongs")
        return
    if number is None or number < 0:
        return
    if column == "completed":
        if number != int(number):
            problems.append(f"{_cell_path(line, label, 'Value')} is {value}, not a whole count")
            return
        number = int(number)
    elif unit not in RATE_UNITS[metric]:
        problems.append(f"line {line} {json.dumps(label)} is in {unit!r}, not a rate it is known by")
        return
    row[column] = number
    paths[column] = _cell_path(line, label, "Value")

"""AIPerf's CSV export (profile_export_aiperf.csv): the summary rounded to two decimals, a table per
kind of figure; read only where its JSON is not beside it, and saying nothing of the settings."""
from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

from stages.formats.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.aiperf.files import (
    beside, folder_concurrency, plain_path, point_source, stem_of)
from stages.ingest.parsers.tools.aiperf.summary import (
    Metric, complete_sent, point_row, summary_figures)
from stages.ingest.parsers.tools.common import BenchParse, ParseError


# CSV row headers (without their unit) -> metric tag.
_CSV_HEADERS = {
    "Time to First Token": "time_to_first_token", "Inter Token Latency": "inter_token_latency",
    "Inter Chunk Latency": "inter_chunk_latency", "Request Latency": "request_latency",
    "Benchmark Duration": "benchmark_duration", "Request Throughput": "request_throughput",
    "Output Token Throughput": "output_token_throughput",
    "Total Token Throughput": "total_token_throughput", "Request Count": "request_count",
    "Error Request Count": "error_request_count", "Total Input Sequence Length": "total_isl",
    "Total Output Sequence Length": "total_osl", "Benchmark Token Count": "benchmark_token_count",
}
# The CSV exporter leaves these units out of a row's name.
_CSV_UNITLESS = {"request_count": "requests", "error_request_count": "requests"}


_CSV_ROW_NAME = re.compile(r"^(?P<header>.*?)(?: \((?P<unit>[^()]*)\))?$")


# --------------------------------------------------------------------------------------------
# The CSV export


def parse_csv(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """The summary's CSV: read only where its JSON is not beside it (one point, never two)."""
    result = BenchParse()
    path = plain_path(name)
    if beside(name, siblings, f"{stem_of(path)}.json"):
        return result
    metrics: dict[str, Metric] = {}
    header: list[str] | None = None
    for line_no, raw in enumerate(decode(data).splitlines(), start=1):
        if not raw.strip():
            header = None
            continue
        cells = next(csv.reader(io.StringIO(raw)))
        if header is None:
            header = cells if cells and cells[0] == "Metric" else []
            continue
        if not header or len(cells) != len(header):
            if header:
                result.errors.append(ParseError(line_no, f"AIPerf CSV row has {len(cells)} cells, "
                                                         f"its table {len(header)}; row not read"))
            continue
        match = _CSV_ROW_NAME.match(cells[0])
        tag = _CSV_HEADERS.get(match.group("header")) if match else None
        if tag is None:
            continue
        unit = match.group("unit") or _CSV_UNITLESS.get(tag)
        columns = ["avg"] if header[1:] == ["Value"] else header[1:]
        stats = {col: _csv_number(cell) for col, cell in zip(columns, cells[1:])}
        metrics[tag] = Metric(unit, stats, lambda stat, n=line_no, h=header: (
            f"line {n}, column {'Value' if h[1:] == ['Value'] else stat}"))
    if not metrics:
        result.errors.append(ParseError(1, "AIPerf CSV holds none of the figures ingest reads; "
                                           "no point read"))
        return result
    concurrency = folder_concurrency(name)
    pid = common.point_id(point_source(name), concurrency)
    row, paths, problems = summary_figures(metrics)
    if problems:
        result.errors.append(ParseError(1, f"{pid}: {', '.join(problems)} where a number belongs; "
                                           "the point is left out"))
        return result
    settings: dict[str, Any] = {"figures_rounded": "the CSV export's two decimals"}
    complete_sent(row, settings)
    point = point_row(pid, 1, row, paths, settings, concurrency)
    point["max_concurrency"] = None
    point["metadata_json"] = json.dumps(settings, sort_keys=True)
    result.points.append(point)
    return result


def _csv_number(cell: str) -> Any:
    """A CSV cell as a number (NaN and inf as floats, to be caught), None when empty, else the
    text itself (caught as a string where a number belongs)."""
    cell = cell.strip()
    if not cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return cell

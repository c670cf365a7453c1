"""GuideLLM's CSV export, one point per benchmark row: 0.2 - 0.3 write one header row ("Successful
Time to first token ms median", ...), 0.4 on three (group, status and unit, statistic), and 0.5 on
add the report's metadata and arguments (Runtime Info) to each row. A CSV exported beside its JSON
or YAML report is not read: the report is."""
from __future__ import annotations

import csv
import io
import json
from pathlib import PurePosixPath
from typing import Any, Callable

from stages.core.numbers import summed_count
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError
from stages.ingest.parsers.tools.guidellm.figures import (
    COUNTS, Figures, nonempty_text, point_row, present, unique_id)


_PERCENTILE_INDEX = {"p90": 7, "p99": 9}   # [min, 0.1, 1, 5, 10, 25, 75, 90, 95, 99, max]

# 0.4 on: column -> (group, "Successful <unit>", statistic, the tool's unit for a time)
_CSV_V4 = (
    ("mean_ttft_ms", "Time to First Token", "Successful ms", "Mean", "ms"),
    ("median_ttft_ms", "Time to First Token", "Successful ms", "Median", "ms"),
    ("p90_ttft_ms", "Time to First Token", "Successful ms", "p90", "ms"),
    ("p99_ttft_ms", "Time to First Token", "Successful ms", "p99", "ms"),
    ("mean_tpot_ms", "Inter Token Latency", "Successful ms", "Mean", "ms"),
    ("median_tpot_ms", "Inter Token Latency", "Successful ms", "Median", "ms"),
    ("p90_tpot_ms", "Inter Token Latency", "Successful ms", "p90", "ms"),
    ("p99_tpot_ms", "Inter Token Latency", "Successful ms", "p99", "ms"),
    ("mean_e2el_ms", "Request Latency", "Successful Sec", "Mean", "s"),
    ("median_e2el_ms", "Request Latency", "Successful Sec", "Median", "s"),
    ("request_throughput", "Server Throughput", "Successful Requests/Sec", "Mean", None),
    ("output_throughput", "Token Throughput", "Successful Output Tokens/Sec", "Mean", None),
    ("total_token_throughput", "Token Throughput", "Successful Total Tokens/Sec", "Mean", None),
)
# 0.2 - 0.3: column -> (metric as the header writes it, statistic, the tool's unit for a time)
_CSV_V2 = (
    ("mean_ttft_ms", "Time to first token ms", "mean", "ms"),
    ("median_ttft_ms", "Time to first token ms", "median", "ms"),
    ("p90_ttft_ms", "Time to first token ms", "p90", "ms"),
    ("p99_ttft_ms", "Time to first token ms", "p99", "ms"),
    ("mean_tpot_ms", "Inter token latency ms", "mean", "ms"),
    ("median_tpot_ms", "Inter token latency ms", "median", "ms"),
    ("p90_tpot_ms", "Inter token latency ms", "p90", "ms"),
    ("p99_tpot_ms", "Inter token latency ms", "p99", "ms"),
    ("mean_e2el_ms", "Request latency", "mean", "s"),
    ("median_e2el_ms", "Request latency", "median", "s"),
    ("request_throughput", "Requests per second", "mean", None),
    ("output_throughput", "Output tokens per second", "mean", None),
    ("total_token_throughput", "Tokens per second", "mean", None),
)
_PERCENTILES_V2 = "[min, 0.1, 1, 5, 10, 25, 75, 90, 95, 99, max]"


def _cell(column: int, line: int, header: str, inside: str | None = None) -> str:
    """Where a CSV figure is: its line, column and header, and the JSON path inside the cell
    where the cell holds JSON."""
    return f"line {line}, column {column + 1}: {header}" + (f", at {inside}" if inside else "")


def _csv_value(raw: str) -> Any:
    """A CSV cell as the number it holds, or the text where it holds none ("" is absent)."""
    text = raw.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _count_of(value: Any) -> Any:
    """A CSV cell's whole number as an int (a setting kept in metadata_json), else as it is."""
    number = common.finite(value)
    count = None if number is None else summed_count(number)
    return value if count is None else count


def _percentile(raw: str, which: str) -> Any:
    """One percentile of the exporter's "[min, 0.1, 1, ..., 99, max]" list, or the text."""
    text = raw.strip()
    if not text:
        return None
    parts = text.strip("[]").split(",")
    if not (text.startswith("[") and text.endswith("]")) or len(parts) != 11:
        return text
    return _csv_value(parts[_PERCENTILE_INDEX[which]])


def _json_cell(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def siblings_hold_report(name: str, siblings: frozenset[str]) -> bool:
    """The JSON or YAML report the CSV was exported beside (same folder and stem)."""
    def stem(n: str) -> str:
        base = PurePosixPath(n[:-3] if n.endswith(".gz") else n)
        return str(base.with_suffix("")) if base.suffix else str(base)
    own = stem(name)
    return any(stem(s) == own and PurePosixPath(s[:-3] if s.endswith(".gz") else s).suffix.lower()
               in (".json", ".yaml", ".yml") for s in siblings)


def _csv_rows(text: str, result: BenchParse) -> list[tuple[int, list[str]]]:
    """(first line, cells) of each CSV row, up to a row the csv module cannot read (an unclosed
    quote: a file cut short), which is an error."""
    rows: list[tuple[int, list[str]]] = []
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    line = 1
    try:
        for cells in reader:
            rows.append((line, cells))
            line = reader.line_num + 1
    except csv.Error as exc:
        result.errors.append(ParseError(line, f"not a readable CSV row: {exc}; the rest of the file is not read"))
    return rows


def parse_csv(name: str, text: str, kind: str, result: BenchParse) -> None:
    table = _csv_rows(text, result)
    depth = 3 if kind == "v4" else 1
    if len(table) <= depth:
        result.errors.append(ParseError(table[-1][0] if table else 1, "GuideLLM CSV export without benchmark rows"))
        return
    heads = [cells for _, cells in table[:depth]]
    width = len(heads[0])
    if any(len(h) != width for h in heads):
        result.errors.append(ParseError(depth, "GuideLLM CSV export whose header rows differ in width; "
                                               "the report is not read"))
        return
    headers = [" / ".join(h[j] for h in heads if h[j]) for j in range(width)]
    columns = {tuple(h[j] for h in heads): j for j in range(width)}
    used: set[str] = set()
    for n, (row_line, cells) in enumerate(table[depth:], start=1):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != width:
            result.errors.append(ParseError(row_line, f"CSV row {n} has {len(cells)} cells where the header "
                                                      f"has {width}; the point is left out"))
            continue
        reader = _csv_v4 if kind == "v4" else _csv_v2
        figures, meta, concurrency, version = reader(cells, columns, headers, row_line)
        pid = unique_id(common.point_id(name, concurrency, n), n, used)
        if figures.problems:
            result.errors.append(ParseError(row_line, f"{pid}: {', '.join(figures.problems)} where a number "
                                                      "belongs; the point is left out"))
            continue
        result.points.append(point_row(name, pid, concurrency, row_line, figures, present(meta), version))


def _csv_strategy(strategy: dict[str, Any], figures: Figures, where: Callable[[str], str]
                  ) -> int | None:
    kind = strategy.get("type_")
    if kind == "synchronous":
        figures.values["max_concurrency"] = 1
        return 1
    concurrency = None
    streams = strategy.get("streams")
    if kind == "concurrent" and isinstance(streams, int) and not isinstance(streams, bool) and streams > 0:
        concurrency = streams
        figures.take("max_concurrency", streams, where("streams"), whole=True)
    if kind in ("constant", "poisson"):
        figures.take("request_rate", strategy.get("rate"), where("rate"))
    return concurrency


def _csv_v4(cells: list[str], columns: dict, headers: list[str], line: int
            ) -> tuple[Figures, dict[str, Any], int | None, str | None]:
    figures = Figures()

    def get(*key: str) -> tuple[str | None, int | None]:
        j = columns.get(key)
        return (None, None) if j is None else (cells[j], j)

    for column, group, status_unit, stat, unit in _CSV_V4:
        raw, j = get(group, status_unit, "Percentiles" if stat in _PERCENTILE_INDEX else stat)
        if raw is None:
            continue
        value = _percentile(raw, stat) if stat in _PERCENTILE_INDEX else _csv_value(raw)
        where = _cell(j, line, headers[j]) + (f" ({stat})" if stat in _PERCENTILE_INDEX else "")
        figures.take(column, value, where, unit)
    for column, status in COUNTS:
        raw, j = get("Request Counts", status.capitalize(), "")
        if raw is not None:
            figures.take(column, _csv_value(raw), _cell(j, line, headers[j]), whole=True)
    raw, j = get("Timings", "Duration", "Sec")
    if raw is not None:
        figures.take("duration_s", _csv_value(raw), _cell(j, line, headers[j]), "s")
    meta: dict[str, Any] = {}
    kind = (get("Benchmark", "Strategy", "")[0] or "").strip()
    run_index = _csv_value(get("Run Info", "Run Index", "")[0] or "")
    profile_raw, profile_j = get("Run Info", "Profile", "")
    profile = _json_cell(profile_raw or "")
    strategy: dict[str, Any] = {"type_": kind} if kind else {}
    strategy_where: Callable[[str], str] = lambda key: ""  # noqa: E731
    done = profile.get("completed_strategies")
    if isinstance(run_index, float) and run_index.is_integer() and isinstance(done, list) \
            and 0 <= int(run_index) < len(done) and isinstance(done[int(run_index)], dict) \
            and done[int(run_index)].get("type_") == kind:
        strategy = done[int(run_index)]
        k = int(run_index)
        strategy_where = lambda key: _cell(  # noqa: E731
            profile_j, line, headers[profile_j], f"completed_strategies[{k}].{key}")
    arguments_raw, arguments_j = get("Runtime Info", "Arguments", "")
    arguments = _json_cell(arguments_raw or "")           # 0.5 - 0.6: the args; 0.7 on: the config
    spec = arguments.get("spec") if isinstance(arguments.get("spec"), dict) else {}
    if kind in ("concurrent", "constant", "poisson") and not ({"streams", "rate"} & strategy.keys()) \
            and isinstance(run_index, float) and run_index.is_integer():
        # the profile's list of streams or rates, one per strategy, as the run was asked for
        k, key = int(run_index), "streams" if kind == "concurrent" else "rate"
        profile_args = spec.get("profile") if isinstance(spec.get("profile"), dict) else {}
        if profile_args.get("kind") == kind and isinstance(profile_args.get(key), list):
            values, at = profile_args[key], f"spec.profile.{key}[{k}]"
        elif arguments.get("profile") == kind and isinstance(arguments.get("rate"), list):
            values, at = arguments["rate"], f"rate[{k}]"   # 0.5 - 0.6 --rate: streams or rates
        else:
            values, at = [], ""
        if 0 <= k < len(values):
            value = values[k]
            if kind == "concurrent" and isinstance(value, float) and value.is_integer():
                value = int(value)
            strategy = {**strategy, key: value}
            where_of = _cell(arguments_j, line, headers[arguments_j], at)
            strategy_where = lambda _key: where_of  # noqa: E731
    concurrency = _csv_strategy(strategy, figures, strategy_where)
    backend = _json_cell(get("Run Info", "Backend", "")[0] or "")
    spec_backend = spec.get("backend") if isinstance(spec.get("backend"), dict) else {}
    model = (nonempty_text(backend.get("model")) or nonempty_text(arguments.get("model"))
             or nonempty_text(spec_backend.get("model")))
    backend_kind = (nonempty_text(backend.get("kind")) or nonempty_text(arguments.get("backend"))
                    or nonempty_text(spec_backend.get("kind")))
    if model:
        figures.values["model_id"] = model
    if backend_kind:
        figures.values["backend"] = backend_kind
    runtime = _json_cell(get("Runtime Info", "Metadata", "")[0] or "")
    version = runtime.get("guidellm_version") if isinstance(runtime.get("guidellm_version"), str) else None
    incomplete = _csv_value(get("Request Counts", "Incomplete", "")[0] or "")
    meta.update(strategy=strategy or None, run_index=_count_of(run_index), target=backend.get("target"),
                incomplete_requests=_count_of(incomplete), report_schema=runtime.get("version"),
                profile=profile.get("type_"))
    return figures, meta, concurrency, version


def _csv_v2(cells: list[str], columns: dict, headers: list[str], line: int
            ) -> tuple[Figures, dict[str, Any], int | None, str | None]:
    figures = Figures()

    def get(header: str) -> tuple[str | None, int | None]:
        j = columns.get((header,))
        return (None, None) if j is None else (cells[j], j)

    for column, metric, stat, unit in _CSV_V2:
        if stat in _PERCENTILE_INDEX:
            raw, j = get(f"Successful {metric} {_PERCENTILES_V2}")
            value = None if raw is None else _percentile(raw, stat)
        else:
            raw, j = get(f"Successful {metric} {stat}")
            value = None if raw is None else _csv_value(raw)
        if raw is not None:
            where = _cell(j, line, headers[j]) + (f" ({stat})" if stat in _PERCENTILE_INDEX else "")
            figures.take(column, value, where, unit)
    for column, status in COUNTS:
        raw, j = get(f"{status.capitalize()} Requests")
        if raw is not None:
            figures.take(column, _csv_value(raw), _cell(j, line, headers[j]), whole=True)
    raw, j = get("Duration")
    if raw is not None:
        figures.take("duration_s", _csv_value(raw), _cell(j, line, headers[j]), "s")
    args_raw, args_j = get("Args")
    args = _json_cell(args_raw or "")
    strategy = args.get("strategy") if isinstance(args.get("strategy"), dict) else {}
    concurrency = _csv_strategy(
        strategy, figures, lambda key: _cell(args_j, line, headers[args_j], f"strategy.{key}"))
    worker = _json_cell(get("Worker")[0] or "")
    if nonempty_text(worker.get("backend_model")):
        figures.values["model_id"] = worker["backend_model"]
    if nonempty_text(worker.get("backend_type")):
        figures.values["backend"] = worker["backend_type"]
    meta = {"strategy": strategy or None, "name": (get("Name")[0] or None),
            "target": worker.get("backend_target"),
            "incomplete_requests": _count_of(_csv_value(get("Incomplete Requests")[0] or "")),
            "profile": common.dig(args, ("profile", "type_"))}
    return figures, meta, concurrency, None

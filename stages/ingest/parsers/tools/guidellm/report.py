"""The points of a GuideLLM report from 0.2 on (JSON or YAML): one per benchmark, from the
successful requests' summary of each metric, its request totals, its strategy and the report's
settings; a benchmark lacking part of its summary (a report cut short or edited) is left out."""
from __future__ import annotations

from typing import Any

from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError
from stages.ingest.parsers.tools.guidellm.document import Lines
from stages.ingest.parsers.tools.guidellm.figures import (
    COUNTS, Figures, nonempty_text, point_row, present, unique_id)
from stages.ingest.parsers.tools.guidellm.requests import request_rows


# column -> (metric, statistic path, the tool's unit for a time, whole number)
_SUMMARY = (
    ("mean_ttft_ms", "time_to_first_token_ms", ("mean",), "ms", False),
    ("median_ttft_ms", "time_to_first_token_ms", ("median",), "ms", False),
    ("p90_ttft_ms", "time_to_first_token_ms", ("percentiles", "p90"), "ms", False),
    ("p99_ttft_ms", "time_to_first_token_ms", ("percentiles", "p99"), "ms", False),
    ("mean_tpot_ms", "inter_token_latency_ms", ("mean",), "ms", False),
    ("median_tpot_ms", "inter_token_latency_ms", ("median",), "ms", False),
    ("p90_tpot_ms", "inter_token_latency_ms", ("percentiles", "p90"), "ms", False),
    ("p99_tpot_ms", "inter_token_latency_ms", ("percentiles", "p99"), "ms", False),
    ("mean_e2el_ms", "request_latency", ("mean",), "s", False),
    ("median_e2el_ms", "request_latency", ("median",), "s", False),
    ("request_throughput", "requests_per_second", ("mean",), None, False),
    ("output_throughput", "output_tokens_per_second", ("mean",), None, False),
    ("total_token_throughput", "tokens_per_second", ("mean",), None, False),
    ("total_input_tokens", "prompt_token_count", ("total_sum",), None, True),
    ("total_output_tokens", "output_token_count", ("total_sum",), None, True),
)


def _strategy_settings(strategy: Any, figures: Figures, where: tuple) -> tuple[str | None, int | None]:
    """(kind, concurrency) of a benchmark's scheduling strategy; its rate and its cap on requests
    in flight go to the figures. synchronous is one request at a time; concurrent runs `streams`;
    a rate (constant, poisson) or throughput has no set concurrency."""
    if not isinstance(strategy, dict):
        return None, None
    kind = strategy.get("type_")
    kind = kind if isinstance(kind, str) else None
    concurrency = None
    if kind == "synchronous":
        concurrency = 1
        figures.values["max_concurrency"] = 1
    elif kind == "concurrent":
        streams = strategy.get("streams")
        if isinstance(streams, int) and not isinstance(streams, bool) and streams > 0:
            concurrency = streams
            figures.take("max_concurrency", streams, common.path(*where, "streams"), whole=True)
    if kind in ("constant", "poisson"):
        figures.take("request_rate", strategy.get("rate"), common.path(*where, "rate"))
    if "max_concurrency" not in figures.values and kind != "synchronous":
        cap = strategy.get("max_concurrency")
        if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
            figures.take("max_concurrency", cap, common.path(*where, "max_concurrency"), whole=True)
    return kind, concurrency


class _Report:
    """The report's settings shared by its benchmarks (model, backend, version)."""

    def __init__(self, doc: dict[str, Any]):
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        self.version = meta.get("guidellm_version") if isinstance(meta.get("guidellm_version"), str) else None
        self.schema = meta.get("version")
        args = doc.get("args") if isinstance(doc.get("args"), dict) else {}
        spec = common.dig(doc, ("config", "spec"))
        spec = spec if isinstance(spec, dict) else {}
        backend = spec.get("backend") if isinstance(spec.get("backend"), dict) else {}
        profile = spec.get("profile") if isinstance(spec.get("profile"), dict) else {}
        self.model = nonempty_text(args.get("model")) or nonempty_text(backend.get("model"))
        self.backend = nonempty_text(args.get("backend")) or nonempty_text(backend.get("kind"))
        self.target = nonempty_text(args.get("target")) or nonempty_text(backend.get("target"))
        self.profile = nonempty_text(args.get("profile")) or nonempty_text(profile.get("kind"))
        data = args.get("data") if args else spec.get("data")
        self.data = data if isinstance(data, (str, list)) else None


def _benchmark(entry: dict[str, Any], i: int, report: _Report
               ) -> tuple[Figures, dict[str, Any], dict[str, Any], str | None, int | None]:
    """The figures, the other settings, the request counts, the strategy and its concurrency of
    benchmark `i` (0.2 on)."""
    base = ("benchmarks", i)
    figures = Figures()
    meta: dict[str, Any] = {}
    newer = isinstance(entry.get("config"), dict)          # 0.4 on
    metrics = entry.get("metrics") if isinstance(entry.get("metrics"), dict) else {}
    if newer:
        totals, totals_at = metrics.get("request_totals"), base + ("metrics", "request_totals")
        strategy_at = base + ("config", "strategy")
    else:
        totals, totals_at = entry.get("request_totals"), base + ("request_totals",)
        strategy_at = base + ("args", "strategy")
    totals = totals if isinstance(totals, dict) else {}
    for column, status in COUNTS:
        figures.take(column, totals.get(status), common.path(*totals_at, status), whole=True)
    if "incomplete" in totals:
        meta["incomplete_requests"] = totals.get("incomplete")
    for column, metric, stat, unit, whole in _SUMMARY:
        at = ("metrics", metric, "successful", *stat)
        figures.take(column, common.dig(entry, at), common.path(*base, *at), unit, whole)
    figures.take("duration_s", entry.get("duration"), common.path(*base, "duration"), "s")
    kind, concurrency = _strategy_settings(common.dig(entry, strategy_at[2:]), figures, strategy_at)

    tool_tpot = common.dig(metrics, ("time_per_output_token_ms", "successful"))
    if isinstance(tool_tpot, dict):
        meta["tool_time_per_output_token_ms"] = {k: tool_tpot.get(k) for k in ("mean", "median")}
    concurrency_seen = common.dig(metrics, ("request_concurrency", "successful", "mean"))
    if concurrency_seen is not None:
        meta["measured_concurrency"] = concurrency_seen
    meta["strategy"] = common.dig(entry, strategy_at[2:])
    meta["start_time"] = entry.get("start_time")
    meta["end_time"] = entry.get("end_time")
    if newer:
        config = entry["config"]
        backend = config.get("backend") if isinstance(config.get("backend"), dict) else {}
        model = nonempty_text(backend.get("model")) or report.model
        backend_kind = nonempty_text(backend.get("kind")) or report.backend
        meta.update(benchmark_id=config.get("id_"), run_id=config.get("run_id"),
                    run_index=config.get("run_index"), target=nonempty_text(backend.get("target")) or report.target,
                    sample_requests=config.get("sample_requests", config.get("sample_size")),
                    warmup_duration=entry.get("warmup_duration"),
                    cooldown_duration=entry.get("cooldown_duration"))
        constraints = config.get("constraints")
        if isinstance(constraints, dict):
            meta["constraints"] = sorted(constraints)
    else:
        args = entry.get("args") if isinstance(entry.get("args"), dict) else {}
        worker = entry.get("worker") if isinstance(entry.get("worker"), dict) else {}
        loader = entry.get("request_loader") if isinstance(entry.get("request_loader"), dict) else {}
        model = nonempty_text(worker.get("backend_model")) or report.model
        backend_kind = nonempty_text(worker.get("backend_type")) or report.backend
        meta.update(benchmark_id=entry.get("id_"), run_id=entry.get("run_id"),
                    strategy_index=args.get("strategy_index"), target=nonempty_text(worker.get("backend_target")),
                    data=loader.get("data"), max_number=args.get("max_number"),
                    max_duration=args.get("max_duration"), warmup_number=args.get("warmup_number"),
                    warmup_duration=args.get("warmup_duration"),
                    cooldown_number=args.get("cooldown_number"),
                    cooldown_duration=args.get("cooldown_duration"),
                    request_samples=entry.get("request_samples"))
        profile = common.dig(args, ("profile", "type_"))
        if isinstance(profile, str):
            meta["profile"] = profile
    if report.profile and "profile" not in meta:
        meta["profile"] = report.profile
    if report.data is not None and "data" not in meta:
        meta["data"] = report.data
    if model:
        figures.values["model_id"] = model
    if backend_kind:
        figures.values["backend"] = backend_kind
    return figures, meta, totals, kind, concurrency


_STATS = ("mean", "median", "percentiles", "total_sum")


def _missing(entry: dict[str, Any]) -> list[str]:
    """What every benchmark the tool writes has and this one lacks: its counts, its duration and
    the successful requests' summary of each metric read (a YAML cut short still parses)."""
    totals_at = ("metrics", "request_totals") if isinstance(entry.get("config"), dict) else ("request_totals",)
    lacks = [common.path(*totals_at)] if not isinstance(common.dig(entry, totals_at), dict) else []
    if "duration" not in entry:
        lacks.append("duration")
    for metric in dict.fromkeys(m for _, m, *_ in _SUMMARY):
        summary = common.dig(entry, ("metrics", metric, "successful"))
        if not isinstance(summary, dict) or any(k not in summary for k in _STATS):
            lacks.append(common.path("metrics", metric, "successful"))
    return lacks


def parse_report(name: str, doc: dict[str, Any], lines: Lines, result: BenchParse) -> None:
    report = _Report(doc)
    used: set[str] = set()
    for i, entry in enumerate(doc["benchmarks"]):
        line = lines.at("benchmarks", i)
        if not isinstance(entry, dict) or not ("config" in entry or "args" in entry):
            result.errors.append(ParseError(line, f"benchmarks[{i}] is not a GuideLLM benchmark; not read"))
            continue
        figures, meta, totals, kind, concurrency = _benchmark(entry, i, report)
        index = i + 1
        pid = unique_id(common.point_id(name, concurrency, index), index, used)
        missing = _missing(entry)
        if missing:
            result.errors.append(ParseError(line, f"{pid}: the benchmark has no {', '.join(missing)} (a "
                                                  "truncated or edited report); the point is left out"))
            continue
        if figures.problems:
            result.errors.append(ParseError(line, f"{pid}: {', '.join(figures.problems)} where a number "
                                                  "belongs; the point is left out"))
            continue
        rows, errors, note = request_rows(entry, i, pid, totals, lines, isinstance(entry.get("config"), dict))
        meta = present({**meta, **note, "report_schema": report.schema})
        result.points.append(point_row(name, pid, concurrency, line, figures, meta, report.version))
        result.requests.extend(rows)
        result.errors.extend(errors)

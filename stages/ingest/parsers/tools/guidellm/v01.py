"""GuideLLM 0.1's GuidanceReport: no summary at all, so each benchmark's point holds its counts and
settings, and its requests (start and end times, time to first token, the gaps between tokens)
hold the figures."""
from __future__ import annotations

from typing import Any

from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError
from stages.ingest.parsers.tools.guidellm.document import Lines
from stages.ingest.parsers.tools.guidellm.figures import (
    Figures, nonempty_text, point_row, present, unique_id, what)


def parse_v01(name: str, doc: dict[str, Any], lines: Lines, result: BenchParse) -> None:
    """0.1's GuidanceReport: each TextGenerationBenchmark is a point; it has no summary, so the
    point holds its counts (its results and errors) and settings, and its requests hold the
    figures."""
    index = 0
    used: set[str] = set()
    for r, report in enumerate(doc["benchmarks"]):
        if not isinstance(report, dict) or not isinstance(report.get("benchmarks"), list):
            result.errors.append(ParseError(lines.at("benchmarks", r), f"benchmarks[{r}] is not a "
                                                                        "benchmark report; not read"))
            continue
        args = report.get("args") if isinstance(report.get("args"), dict) else {}
        for b, bench in enumerate(report["benchmarks"]):
            index += 1
            where = ("benchmarks", r, "benchmarks", b)
            line = lines.at(*where)
            if not isinstance(bench, dict) or not isinstance(bench.get("results", []), list) \
                    or not isinstance(bench.get("errors", []), list):
                result.errors.append(ParseError(line, f"{common.path(*where)} is not a benchmark of "
                                                      "results and errors; not read"))
                continue
            figures = Figures()
            mode = bench.get("mode")
            concurrency = 1 if mode == "synchronous" else None
            if mode == "synchronous":
                figures.values["max_concurrency"] = 1
            if mode == "asynchronous":
                figures.take("request_rate", bench.get("rate"), common.path(*where, "rate"))
            if figures.problems:
                result.errors.append(ParseError(line, f"{common.path(*where)}: {', '.join(figures.problems)} "
                                                      "where a number belongs; the point is left out"))
                continue
            results, errors = bench.get("results", []), bench.get("errors", [])
            pid = unique_id(common.point_id(name, concurrency, index), index, used)
            row = point_row(name, pid, concurrency, line, figures, present({
                "mode": mode, "rate_type": args.get("mode"), "rates": args.get("rate"),
                "target": args.get("target"), "data": args.get("data"), "data_type": args.get("data_type"),
                "tokenizer": args.get("tokenizer"), "max_number": args.get("max_number"),
                "max_duration": args.get("max_duration"),
                "counts_from": "the lengths of results and errors (0.1 writes no summary)"}), None)
            row.update(num_prompts=len(results) + len(errors), completed=len(results), failed=len(errors))
            if nonempty_text(args.get("model")):
                row["model_id"] = args["model"]
            if nonempty_text(args.get("backend_type")):
                row["backend"] = args["backend_type"]
            rows, problem = _v01_requests(pid, where, results, errors, lines)
            result.points.append(row)
            result.requests.extend(rows)
            if problem:
                result.errors.append(ParseError(line, f"{pid}: {problem}; its requests are left out"))


def _v01_requests(pid: str, where: tuple, results: list, errors: list, lines: Lines
                  ) -> tuple[list[dict[str, Any]], str | None]:
    rows: list[dict[str, Any]] = []
    for j, record in enumerate(results):
        at = where + ("results", j)
        if not isinstance(record, dict):
            return [], f"{common.path(*at)} is {what(record)}, not a result"
        row = {"point_id": pid, "request_idx": len(rows), "source_line": lines.at(*at),
               "record_path": common.path(*at), "error": None}
        paths: dict[str, str] = {}
        for column, key, whole in (("input_tokens", "prompt_token_count", True),
                                   ("output_tokens", "output_token_count", True),
                                   ("ttft_s", "first_token_time", False),
                                   ("start_time_s", "start_time", False)):
            value = record.get(key)
            if value is None:
                continue
            number = common.finite(value)
            if number is None or (whole and not number.is_integer()):
                return [], f"{common.path(*at, key)} is {what(value)} where a number belongs"
            row[column] = int(number) if whole else number
            paths[column] = key
        start, end = common.finite(record.get("start_time")), common.finite(record.get("end_time"))
        if record.get("end_time") is not None and end is None:
            return [], f"{common.path(*at, 'end_time')} is {what(record.get('end_time'))} where a number belongs"
        if start is not None and end is not None:
            row["latency_s"] = end - start                # the tool's own request latency
            paths["latency_s"] = "end_time - start_time"
        gaps = common.dig(record, ("decode_times", "data"))
        if isinstance(gaps, list):
            if any(common.finite(g) is None for g in gaps):
                return [], f"{common.path(*at, 'decode_times', 'data')} holds something other than a number"
            row["itl_count"], row["itl_sum_s"] = len(gaps), float(sum(gaps))
            paths["itl_count"] = paths["itl_sum_s"] = "decode_times.data"
        row["field_paths"] = common.paths_json(paths)
        rows.append(row)
    for j, record in enumerate(errors):
        at = where + ("errors", j)
        if not isinstance(record, dict):
            return [], f"{common.path(*at)} is {what(record)}, not an error record"
        message = record.get("message")
        rows.append({"point_id": pid, "request_idx": len(rows), "source_line": lines.at(*at),
                     "record_path": common.path(*at),
                     "error": str(message) if message not in (None, "") else "error",
                     "field_paths": common.paths_json({"error": "message"} if message not in (None, "") else {})})
    return rows, None

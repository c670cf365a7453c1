"""An LLMPerf summary (`<run>_summary.json`) read into its point: latencies and rates from their
statistics (with or without the `results_` prefix), the time per output token by the key the
release writes, the request counts, and the run's settings."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any

from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import ParseError
from stages.ingest.parsers.tools.llmperf.values import (
    TOOL, finite_number, flatten, jsonable, run_point_id, what_is)


RESULTS = "results_"

# Statistics of a metric: `<metric>_quantiles_pNN`, `_mean`, `_min`, `_max`, `_stddev`.
_STAT = re.compile(r"^(?:results_)?(?P<metric>[a-z_]+?)_(?:quantiles_p\d+|mean|min|max|stddev)$")
_METRICS = ("inter_token_latency_s", "sum_inter_token_latency_s", "mean_inter_token_latency_s",
            "ttft_s", "end_to_end_latency_s", "request_output_throughput_token_per_s",
            "number_input_tokens", "number_output_tokens")

# The per-request time per output token, by the key the release writes: (key, what it is).
TPOT_KEYS = (
    ("mean_inter_token_latency_s",
     "mean_inter_token_latency_s: per request, the gaps after the first token over output "
     "tokens - 1"),
    ("inter_token_latency_s",
     "inter_token_latency_s: per request, the time to the first token and every later gap over "
     "output tokens"),
)

# The summary's figures by their key without the `results_` prefix: latencies in seconds (to the
# *_ms columns), the statistics of the time per output token (after the TPOT_KEYS key), the rates
# (the completed requests per minute become requests per second) and the counts.
_LATENCIES = (
    ("mean_ttft_ms", "ttft_s_mean"), ("median_ttft_ms", "ttft_s_quantiles_p50"),
    ("p90_ttft_ms", "ttft_s_quantiles_p90"), ("p99_ttft_ms", "ttft_s_quantiles_p99"),
    ("mean_e2el_ms", "end_to_end_latency_s_mean"),
    ("median_e2el_ms", "end_to_end_latency_s_quantiles_p50"),
)
_TPOT_STATS = (("mean_tpot_ms", "mean"), ("median_tpot_ms", "quantiles_p50"),
               ("p90_tpot_ms", "quantiles_p90"), ("p99_tpot_ms", "quantiles_p99"))
_RATES = (("output_throughput", "mean_output_throughput_token_per_s", 1.0),
          ("request_throughput", "num_completed_requests_per_min", 1.0 / 60.0))
_COUNTS = (("num_prompts", "num_requests_started"), ("completed", "num_completed_requests"),
           ("failed", "number_errors"))


# ---------------------------------------------------------------- the summary

def summary_point(obj: dict[str, Any], name: str, line: int) -> tuple[dict[str, Any] | None,
                                                                       list[ParseError]]:
    pid = run_point_id(name)
    flat = flatten(obj)
    row: dict[str, Any] = {"point_id": pid, "source_line": line, "tool": TOOL}
    paths: dict[str, str] = {}
    used: set[str] = set()
    bad: list[str] = []            # figures that are not finite numbers

    def get(key: str) -> tuple[str, Any, tuple[str, ...]] | None:
        """A figure under `results_<key>` (LLMPerf 2) or `<key>` (the fork's schedule mode)."""
        for full in (RESULTS + key, key):
            if full in flat:
                return full, *flat[full]
        return None

    def take(key: str) -> tuple[Any, str, float | None] | None:
        """The figure under `key` (counted as read), its path and its number (None for none)."""
        found = get(key)
        if found is None:
            return None
        full, value, where = found
        used.add(full)
        return value, common.path(*where), finite_number(value)

    def figure(column: str, key: str, factor: float) -> None:
        taken = take(key)
        if taken is None:
            return
        value, where, number = taken
        if number is None:
            bad.append(f"{where} is {what_is(value)}")
            return
        row[column] = number * factor
        paths[column] = where

    for column, key in _LATENCIES:
        figure(column, key, 1000.0)
    tpot_key, tpot_definition = next(
        ((k, d) for k, d in TPOT_KEYS if get(f"{k}_quantiles_p50") or get(f"{k}_mean")),
        (None, None))
    if tpot_key:
        for column, stat in _TPOT_STATS:
            figure(column, f"{tpot_key}_{stat}", 1000.0)
    for column, key, factor in _RATES:
        figure(column, key, factor)

    count_problems: list[str] = []
    for column, key in _COUNTS:
        taken = take(key)
        if taken is None:
            continue
        value, where, number = taken
        if number is None or number != int(number) or number < 0:
            count_problems.append(f"{where} is {what_is(value) if number is None else repr(value)}, not a count")
            continue
        row[column] = int(number)
        paths[column] = where

    errors: list[ParseError] = []
    if not used:
        return None, [ParseError(line, f"{pid}: the summary holds none of LLMPerf's figures (no "
                                       "request was measured); no point")]
    completed = row.get("completed")
    if count_problems or (bad and (completed is None or completed > 0)):
        problems = count_problems + bad
        errors.append(ParseError(line, f"{pid}: {'; '.join(problems)} where a number belongs; "
                                       "the point is left out"))
        return None, errors

    concurrency = obj.get("num_concurrent_requests")
    if isinstance(concurrency, int) and not isinstance(concurrency, bool) and concurrency > 0:
        row["max_concurrency"] = concurrency
        paths["max_concurrency"] = "num_concurrent_requests"
        used.add("num_concurrent_requests")
    model = obj.get("model")
    if isinstance(model, str) and model:
        row["model_id"] = model
        paths["model_id"] = "model"
        used.add("model")
    stamp = finite_number(obj.get("timestamp"))
    if stamp is not None and 0 < stamp < 1e11:
        row["date"] = datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y%m%d-%H%M%S")
        paths["date"] = "timestamp"
    version = obj.get("version")
    row["tool_version"] = (str(version) if isinstance(version, (str, int, float)) and version != ""
                           else None)

    workload, name_concurrency, repeat = common.split_point_id(pid)
    row["workload"] = workload
    row["concurrency"] = row.get("max_concurrency", name_concurrency)
    row["repeat"] = repeat or 1

    extra: dict[str, Any] = {}
    for key, (value, where) in flat.items():
        if key in used or key in ("version",) or isinstance(value, (list, dict)):
            continue
        stat = _STAT.match(key)
        if stat and stat.group("metric") in _METRICS:
            continue                      # the statistics the columns do not hold stay in the file
        extra[key] = jsonable(value)
    if tpot_definition:
        extra["tpot_definition"] = tpot_definition
    if bad:
        extra["left_out"] = sorted(bad)
    row["metadata_json"] = json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else None
    row["summary_paths"] = common.paths_json(paths)
    return row, errors

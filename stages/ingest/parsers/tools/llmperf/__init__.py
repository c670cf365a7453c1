"""LLMPerf (ray-project/llmperf, `token_benchmark_ray.py --results-dir`) result files, and the
published files of its leaderboard and forks.

One run writes two files that share a name, `<name>_summary.json` and
`<name>_individual_responses.json` (`<name>` is `<model>_<mean input>_<mean output>`, sanitised):

- the summary: one JSON object, flat (LLMPerf's flatten_dict joins nested keys with `_`), the
  statistics of the successful requests under `results_<metric>_quantiles_p25..p99`, `_mean`,
  `_min`, `_max`, `_stddev` (seconds for the latencies), the counts `results_num_requests_started`
  (every request that came back, failed ones included), `results_num_completed_requests` (those
  without an error code), `results_number_errors`, `results_num_completed_requests_per_min`, the
  overall `results_mean_output_throughput_token_per_s` (output tokens of the successful requests
  over the test's wall time: not a mean over requests), and the settings (`model`,
  `num_concurrent_requests`, `mean_input_tokens`, ...), `--metadata` keys, `timestamp` (Unix
  seconds) and `version` (LLMPerf's RESULTS_VERSION, the results format's date);
- the requests: a JSON list, one object per request in the order they completed: `ttft_s`,
  `end_to_end_latency_s`, `inter_token_latency_s`, `number_input_tokens`,
  `number_output_tokens`, `error_code` (null when it succeeded), `error_msg`.

Shapes read (tests/fixtures/bench_tools/llmperf/README.md lists them with the files they were
modelled on):
- LLMPerf 2 (tag v2.0 to main, RESULTS_VERSION 2023-08-31): as above. Its `inter_token_latency_s`
  is per request the time to the first token plus every later gap, over the output tokens; it
  becomes the point's *_tpot_ms and the request's tpot_ms, as the tool recorded it (metadata
  `tpot_definition` says so). The leaderboard's published files add `--metadata` keys
  (`framework`, `model_size`, `api`) and, for some providers, a `GEN_TEXT` per request.
- the fork with RESULTS_VERSION 2025-10-14 (mtaylor-utilidata/llmperf): `inter_token_latency_s`
  split into `sum_inter_token_latency_s` and `mean_inter_token_latency_s` (the gaps after the
  first token over output tokens - 1: a time per output token without the first), each request's
  `start_time`/`end_time` (Unix seconds) and `request_id`; in its schedule mode the summary's
  statistics carry no `results_` prefix, `num_concurrent_requests` is the word "scheduled", and
  the files are `summary.json` and `individual_responses.json` in a folder of their own.
- a summary whose statistics are nested objects (`results_ttft_s: {quantiles: {p50: ...}}`, as a
  re-implementation serialises LLMPerf's summary before flattening) is read through the same
  flattening, each figure keeping its real path.

Point ids: the two files of one run meet in one point. The requests file does not state the
concurrency, so the id comes from the shared name alone: `common.point_id(<name>, None, 1)`,
`<name>` itself where it already names a point (`<workload>__c<NN>`), else `<name>__i1`; the
summary's `num_concurrent_requests` is the point's concurrency. `<name>` is the file's stem less
`_summary` / `_individual_responses`; for the schedule mode's bare `summary.json` it is the name of
the folder that holds it.

Nothing is guessed: a figure that is not a finite number is left out of the row. Where the
summary counts completed requests and still gives a statistic that is not a finite number, the
point is left out with an error (its other figures cannot be trusted); where no request completed
(pandas writes NaN for every statistic) the point keeps its counts and names the figures left out
in its metadata (`left_out`). A request's figure that is not a number is left out of its row, with
an error where the request succeeded. A file that is not valid JSON gives one error and no rows.
"""
from __future__ import annotations

from pathlib import PurePosixPath

from stages.formats.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError
from stages.ingest.parsers.tools.llmperf.requests import request_rows
from stages.ingest.parsers.tools.llmperf.summary import TPOT_KEYS, summary_point
from stages.ingest.parsers.tools.llmperf.values import (  # noqa: F401 (the package's own names)
    REQUESTS_SUFFIX, SUMMARY_SUFFIX, TOOL, load, run_name, run_point_id, stem_of, what_is)

_HEAD_BYTES = 1 << 16


# ---------------------------------------------------------------- recognising

_SUMMARY_MARKS = ('ttft_s_quantiles_p50"', '"results_ttft_s"', 'num_requests_started"',
                  'num_completed_requests"', '"num_launched"')
# LLMPerf's own statistic names, all three in a summary even where `num_concurrent_requests` comes
# last (the schedule mode) and the file is cut before it.
_STAT_MARKS = ('inter_token_latency_s_quantiles_p50"', 'ttft_s_quantiles_p50"',
               'end_to_end_latency_s_quantiles_p50"')
_REQUEST_MARKS = ('"ttft_s"', '"end_to_end_latency_s"', '"number_output_tokens"')


def recognise(name: str, data: bytes) -> bool:
    """An LLMPerf summary (an object naming `num_concurrent_requests` and one of LLMPerf's own
    figures, or the medians of its time to first token, inter-token and end-to-end latency) or a
    requests file (a list whose records hold `ttft_s`, `end_to_end_latency_s`,
    `number_output_tokens` and `error_code`), whatever the file's name; an empty list only under
    the name LLMPerf gives its requests file. Decided from the first 64 KiB, so a file cut short is
    still recognised (parse then says what is wrong with it)."""
    head = decode(data[:_HEAD_BYTES]).lstrip()
    if head.startswith("{"):
        return (('"num_concurrent_requests"' in head and any(m in head for m in _SUMMARY_MARKS))
                or all(m in head for m in _STAT_MARKS))
    if head.startswith("["):
        if all(m in head for m in _REQUEST_MARKS) and '"error_code"' in head:
            return True
        return head.rstrip() == "[]" and stem_of(name).endswith(REQUESTS_SUFFIX[1:])
    return False


# ---------------------------------------------------------------- a requests file alone

def _summary_beside(name: str, siblings: frozenset[str]) -> bool:
    """Whether the summary of the same run may give the point of requests file `name`: a file
    beside it that shares its run's name (`<name>_summary.json` beside
    `<name>_individual_responses.json`, `summary.json` beside the schedule mode's bare
    `individual_responses.json`), or the leaderboard's layout, whose `individual/<name>.json` has
    its summary in `summary/<name>.json`, a folder beside it. Then the requests only meet it."""
    plain = name[:-3] if name.endswith(".gz") else name
    if PurePosixPath(plain).parent.name == "individual":
        return True
    own = run_name(plain)
    return any(run_name(other[:-3] if other.endswith(".gz") else other) == own
               for other in siblings if other != name)


def _tpot_definition(records: list) -> str | None:
    """What the requests' tpot_ms is, by the key the release writes (summary.TPOT_KEYS)."""
    return next((what for key, what in TPOT_KEYS
                 if any(isinstance(r, dict) and key in r for r in records)), None)


# ---------------------------------------------------------------- parse

def parse(name: str, data: bytes, siblings: frozenset[str] = frozenset()) -> BenchParse:
    """The point of a summary file, or the request rows of a requests file, with errors for
    whatever could not be read. A requests file with no summary of its run beside it (`siblings`)
    gives its point too, made from its records (common.point_from_requests)."""
    result = BenchParse()
    text = decode(data)
    value, line, error = load(text)
    if error:
        result.errors.append(error)
        return result
    if isinstance(value, dict):
        point, errors = summary_point(value, name, line)
        result.errors.extend(errors)
        if point is not None:
            result.points.append(point)
    elif isinstance(value, list):
        rows, errors = request_rows(value, text, name)
        result.requests.extend(rows)
        result.errors.extend(errors)
        if rows and not errors and not _summary_beside(name, siblings):
            result.points.append(common.point_from_requests(
                run_point_id(name), rows, tool=TOOL, line=rows[0]["source_line"], concurrency=None,
                concurrency_from=None,
                settings={"point_from": f"{PurePosixPath(name).name} alone: no summary of the run "
                                        "beside it",
                          "tpot_definition": _tpot_definition(value)}))
    else:
        result.errors.append(ParseError(line, "an LLMPerf result is a JSON object (the summary) or "
                                              f"a list (the requests), not {what_is(value)}"))
    return result

"""GuideLLM's benchmark reports (`guidellm benchmark`, github.com/vllm-project/guidellm, earlier
neuralmagic/guidellm): JSON, YAML or the CSV export, one point per benchmark (one per strategy run:
synchronous, concurrent at N streams, a constant or Poisson rate, throughput).

The shapes, by the release that writes them:
  0.1        {"benchmarks": [{"benchmarks": [{mode, rate, results, errors, concurrencies}], args}]}:
             no summary at all, each request's start and end times, its time to first token in
             seconds and the gaps between its tokens (decode_times.data, seconds).
  0.2 - 0.3  {"benchmarks": [{type_: generative_benchmark, args: {strategy}, run_stats, worker,
             metrics, request_totals, requests: {successful, errored, incomplete}, duration}]}.
  0.4        {"args", "benchmarks": [{config: {strategy}, scheduler_state, scheduler_metrics,
             metrics: {request_totals, ...}, requests, start_time, end_time, duration}]}.
  0.5 - 0.6  the same, after {"metadata": {version: 1, guidellm_version}}.
  0.7 on     the same benchmarks under {"metadata": {version: 2, ...}, "config": {spec}}.
  0.8        report schema 2 still: every distribution adds mean_ci and percentile_cis, a
             benchmark adds warnings and the dispatch and round-trip distributions (not read).
  CSV        0.2 - 0.3: one header row ("Successful Time to first token ms median", ...);
             0.4 on: three header rows (group, status and unit, statistic); 0.5 on adds the
             report's metadata and arguments (Runtime Info) to each row.
YAML is the JSON's content as yaml.dump writes it (keys sorted). The JSON is one object on one
line: a point's source_line is the line its benchmark starts on (1), a YAML's is its own line.
A point's id is common.point_id of the file, the strategy's concurrency and the benchmark's
position (from 1); times are epoch seconds as the tool writes them (start_time_s too).

Each metric is a distribution per status; the point takes the successful requests' one, as the
tool's own console table does: time_to_first_token_ms (ms), inter_token_latency_ms (ms; each
request's (last token - first token) / (output tokens - 1), the project's time per output token,
the tool weighting each request by its output tokens - 1), request_latency (seconds),
requests_per_second, output_tokens_per_second and tokens_per_second (the tool's rates over the
benchmark's time; their mean is what it prints as throughput), prompt_token_count and
output_token_count (total_sum: the tokens of all successful requests). The tool's own
time_per_output_token_ms (divided by all output tokens, and from 0.4 on counting the time to the
first token) is another figure than the project's TPOT: it is kept in metadata_json only.
request_totals counts the requests of the benchmark: num_prompts = total, completed = successful,
failed = errored (incomplete ones, cut off when the benchmark ended, are counted in num_prompts
and in metadata_json).

Per-request rows come from requests.successful / errored / incomplete, in the file's order
(a YAML's sorted keys put errored first), only when they are the requests the summary counts:
from 0.4 on the lists also hold the warm-up and cool-down requests, which the tool leaves out of
its summary by its own rule (a request counts when it ended after scheduler_metrics'
measure_start_time and started before its measure_end_time): the same rule leaves them out here.
A report saved with --output-sampling / --sample-requests keeps its points on the tool's
summary, with an error saying its requests are left out. A request's TTFT, latency and tpot_ms
(its inter_token_latency_ms; none for a request of fewer than two output tokens) are the tool's
own; 0.1's latency is its end_time - start_time, its token gaps itl_count / itl_sum_s.
"""
from __future__ import annotations

import re

from stages.formats.lines import decode
from stages.ingest.parsers.tools.common import BenchParse, ParseError
from stages.ingest.parsers.tools.guidellm.csv_export import parse_csv, siblings_hold_report
from stages.ingest.parsers.tools.guidellm.document import load_report
from stages.ingest.parsers.tools.guidellm.figures import TOOL  # noqa: F401 (the tool's name)
from stages.ingest.parsers.tools.guidellm.report import parse_report
from stages.ingest.parsers.tools.guidellm.v01 import parse_v01

_HEAD = 256 * 1024


# --- recognising -------------------------------------------------------------------------------

_JSON_V2 = re.compile(r'"benchmarks"\s*:\s*\[\s*\{\s*"type_"\s*:\s*"generative_benchmark"')
_JSON_V4 = re.compile(r'^\{\s*"metadata"\s*:\s*\{[^{}]*"guidellm_version"\s*:')
_JSON_V1 = re.compile(r'^\{\s*"benchmarks"\s*:\s*\[\s*\{\s*"benchmarks"\s*:\s*\[\s*\{\s*"mode"\s*:\s*'
                      r'"(?:synchronous|asynchronous|throughput)"\s*,\s*"rate"\s*:')
_YAML_START = re.compile(r"^(?:---\s*\n)?(?:benchmarks|metadata|args|config):[ \t]*\n")
_YAML_MARKS = (re.compile(r"^\s*-?\s*type_: generative_benchmark\s*$", re.M),
               re.compile(r"^\s*guidellm_version: ", re.M))
_YAML_V1_MARKS = (re.compile(r"^\s*-?\s*decode_times:\s*$", re.M),
                  re.compile(r"^\s*-?\s*first_token_set: (?:true|false)\s*$", re.M),
                  re.compile(r"^\s*-?\s*mode: (?:synchronous|asynchronous|throughput)\s*$", re.M))
_CSV_V2_HEAD = "Type,Run Id,Id,Name,Start Time,End Time,Duration,Successful Requests,"
_CSV_V4_HEAD = ("Run Info,Run Info,", "Run ID,Run Index,")


def recognise(name: str, data: bytes) -> bool:
    """A GuideLLM report, by its content: its JSON opens with the `guidellm_version` metadata
    (0.5 on) or 0.1's nested benchmarks of a mode, or holds a list of benchmarks of type
    `generative_benchmark` in its head (0.2 - 0.4); its YAML holds those at its head or tail
    (yaml.dump sorts keys, so they may come last); its CSV opens with the exporter's header rows."""
    head = decode(data[:_HEAD]).lstrip("\ufeff")
    text = head.lstrip()
    if text.startswith("{"):
        return bool(_JSON_V4.match(text) or _JSON_V1.match(text) or _JSON_V2.search(text))
    if _csv_kind(head):
        return True
    if _YAML_START.match(head):
        ends = head if len(data) <= _HEAD else head + "\n" + decode(data[-_HEAD:])
        return (any(mark.search(ends) for mark in _YAML_MARKS)
                or all(mark.search(ends) for mark in _YAML_V1_MARKS))
    return False


def _csv_kind(head: str) -> str | None:
    lines = head.split("\n", 2)
    if lines[0].startswith(_CSV_V2_HEAD):
        return "v2"
    if len(lines) > 1 and lines[0].startswith(_CSV_V4_HEAD[0]) and lines[1].startswith(_CSV_V4_HEAD[1]):
        return "v4"
    return None


# --- entry point -------------------------------------------------------------------------------

def parse(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """Points, per-request rows and errors of one GuideLLM report (JSON, YAML or CSV). A CSV
    exported beside its JSON or YAML report (same stem) gives nothing: the report is read."""
    result = BenchParse()
    text = decode(data).lstrip("\ufeff")
    kind = _csv_kind(text[:_HEAD])
    if kind:
        if not siblings_hold_report(name, siblings):
            parse_csv(name, text, kind, result)
        return result
    doc, lines, errors = load_report(text)
    result.errors.extend(errors)
    if errors or lines is None:
        return result
    benchmarks = doc.get("benchmarks") if isinstance(doc, dict) else None
    if not isinstance(benchmarks, list):
        result.errors.append(ParseError(lines.first, "not a GuideLLM report: no list of benchmarks; not read"))
        return result
    if not benchmarks:
        result.errors.append(ParseError(lines.first, "GuideLLM report without benchmarks"))
        return result
    if isinstance(benchmarks[0], dict) and isinstance(benchmarks[0].get("benchmarks"), list) \
            and "type_" not in benchmarks[0]:
        parse_v01(name, doc, lines, result)
    else:
        parse_report(name, doc, lines, result)
    return result

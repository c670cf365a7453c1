"""NVIDIA AIPerf (the successor of GenAI-Perf) result files, in every shape its releases write:

* `profile_export_aiperf.json`, the summary of one run: one object per metric (`unit`, `avg`,
  `min`, `max`, `p1` ... `p99`, `std`; by 0.10.0 also `count` and `sum`) and the run's
  settings (`input_config`). Releases 0.1.x nest the metrics under `records`, keyed by tag, each
  also naming its `tag` and `header`, time to first token being `ttft`; from 0.2.0 each metric is a
  top-level key (the GenAI-Perf layout), time to first token being `time_to_first_token`; from
  0.4.0 `schema_version`, `aiperf_version` and `benchmark_id` lead the file. The load is
  `input_config.loadgen` (`concurrency`, `request_rate`, ...) through 0.5.0, and by 0.8.0
  `input_config.phases` (a `warmup` phase excluded from the results, and a `profiling` one).
* `profile_export_aiperf.csv`, the same summary rounded to two decimals: a table `Metric,avg,
  min,max,[sum,]p1,...` (one row per metric with percentiles, named `Header (unit)`), a blank line,
  then `Metric,Value` (the single figures), then GPU telemetry. Read only where the JSON is not
  beside it; it says nothing of the settings (model, concurrency).
* `profile_export.jsonl` (0.2.0 on), one JSON line per request of the profiling phase:
  `metadata` (`session_num`, `request_start_ns`, `request_end_ns` as epoch nanoseconds,
  `benchmark_phase`, `was_cancelled`, ...), `metrics` (each `{"value", "unit"}`, in display units)
  and `error` (`{"code", "type", "message"}`; null when it succeeded, absent by 0.10.0). Before
  0.2.0 the main branch wrote `timestamp_ns` and `credit_phase` instead, and the summary's tags.

What the figures are: `request_count` counts the requests that succeeded, `error_request_count`
those that failed (cancelled ones included; absent where none failed), so the requests sent are
their sum. `inter_token_latency` is each request's (latency - TTFT) / (output tokens - 1), the
time per output token (TPOT) of vLLM's tool; `inter_chunk_latency` pools the gaps between
streamed chunks, the ITL. `output_sequence_length` (`total_osl`) counts reasoning tokens too, and
`output_token_throughput` is `total_osl` over `benchmark_duration`; `total_output_tokens` leaves
the reasoning tokens out in the 0.1.x layout, so it is not read. Units are read from the file:
ms and sec for times, ns for timestamps, tokens/sec and requests/sec for rates.

The point: AIPerf names its files the same for every run (or `<prefix>.json`, `<prefix>.jsonl`
with --profile-export-prefix), so the point id comes from the file's stem where that names a point
(`<workload>__c<NN>`), else from its folder's name where that does, else from the summary's stem
and the concurrency: the summary states it in its settings; the per-request file and the CSV only
through the folder AIPerf names by default (`<model>-openai-chat-concurrency<N>`). The request
file is named by its summary's stem (`profile_export.jsonl` -> `profile_export_aiperf`), so both
meet in one point.
"""
from __future__ import annotations

import re

from stages.ingest.parsers.tools.aiperf.csv_export import parse_csv
from stages.ingest.parsers.tools.aiperf.files import TOOL, is_record, is_summary, json_object  # noqa: F401
from stages.ingest.parsers.tools.aiperf.records import parse_records
from stages.ingest.parsers.tools.aiperf.summary import parse_summary
from stages.ingest.parsers.tools.common import BenchParse, ParseError


_CSV_HEAD = re.compile(rb"^\s*Metric,avg,min,max,(?:sum,)?p1,p5,")


_SUMMARY_MARKS = (b'"aiperf_version"', b'"cli_command": "aiperf')
_RECORD_MARKS = (b'"record_processor_id"', b'"benchmark_phase"', b'"credit_phase"')
_MAX_JSON_BYTES = 64 << 20


# --------------------------------------------------------------------------------------------
# Recognising


def recognise(name: str, data: bytes) -> bool:
    """An AIPerf summary (JSON or CSV) or per-request JSON-lines file, by its content: a summary
    with AIPerf's settings (`input_config` with `loadgen`, `phases`, `models.items` or an
    `aiperf` command line, or `aiperf_version`) beside its metric objects; a JSON line with the
    `metadata` (record processor, benchmark phase) and `metrics` of a request record; the CSV's
    header row, whose percentiles run upwards from p1 (GenAI-Perf's run down from p99). A file cut
    short is recognised by those keys in its text, so that parse can say what is wrong."""
    del name  # by content alone
    head = data[:65536].lstrip()
    if _CSV_HEAD.match(head):
        return True
    if not head.startswith(b"{"):
        return False
    first = head.split(b"\n", 1)[0]
    record = json_object(first)
    if record is not None:
        if is_record(record):
            return True
        if is_summary(record):  # a summary written on one line
            return True
    elif first.startswith(b'{"metadata"') and any(mark in first for mark in _RECORD_MARKS):
        return True
    if len(data) <= _MAX_JSON_BYTES and (data.find(b'"input_config"') != -1
                                         or data.find(b'"records"') != -1):
        whole = json_object(data)
        if whole is not None:
            return is_summary(whole)
    return (any(mark in head for mark in _SUMMARY_MARKS)
            or (b'"input_config"' in head and (b'"loadgen"' in head or b'"phases"' in head))
            or (head.startswith(b'{\n  "records": {') and b'"tag"' in head and b'"header"' in head))


# --------------------------------------------------------------------------------------------
# Parsing


def parse(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """The point (summary) or the requests (JSON lines) of one AIPerf file; errors, never an
    exception, for a file that is cut short, damaged, or holds something other than a number
    where a figure belongs."""
    try:
        head = data[:65536].lstrip()
        if _CSV_HEAD.match(head):
            return parse_csv(name, data, siblings)
        first = head.split(b"\n", 1)[0]
        record = json_object(first)
        if (record is not None and is_record(record)) or (
                record is None and first.startswith(b'{"metadata"')):
            return parse_records(name, data, siblings)
        return parse_summary(name, data)
    except Exception as exc:  # noqa: BLE001 - a file must give errors, never stop ingest
        return BenchParse(errors=[ParseError(1, f"AIPerf file not read: {type(exc).__name__}: {exc}")])

"""NVIDIA GenAI-Perf (triton-inference-server/perf_analyzer, genai-perf/; before August 2024
triton-inference-server/client, src/c++/perf_analyzer/genai-perf/): its summary JSON
(`<export>_genai_perf.json`), its summary CSV (`<export>_genai_perf.csv`, read only where the JSON
is not beside it) and perf_analyzer's per-request export (`<export>.json`, `--profile-export-file`).

The shapes, by release (the package's `__version__`; the files never say which):

* summary JSON: one object per metric, `{"unit": ..., "avg": ..., "p25".."p99", "min", "max",
  "std"}` (throughputs and request_count: `avg` only), then `input_config`.
  0.0.3: times in ns, `num_output_token` / `num_input_token`, flat `input_config` (argparse).
  0.0.4 – 0.0.9: times in ms, `output_sequence_length` / `input_sequence_length`.
  0.0.10 – 0.0.12: adds `request_count` and `time_to_second_token`.
  0.0.13: `input_config` nested (`model_names`, `endpoint`, `perf_analyzer.stimulus`, ...);
  `output_token_throughput_per_user` replaces `output_token_throughput_per_request`.
  0.0.15 on: adds p1, p5, p10.
* summary CSV: a table `Metric,avg,min,max,p99,p95,p90,p75,p50,p25[,p10,p5,p1]`, a blank line,
  `Metric,Value` (throughputs, request count), then GPU telemetry tables (not read). Numbers are
  written `{:,.2f}` from 0.0.4 (`"1,146.31"`), `N/A` where the tool had none. 0.0.1 heads its one
  table `Statistic,...` and names rows `time_to_first_token(ns)`; 0.0.2 – 0.0.3 write
  `Time To First Token (ns)`; 0.0.4 on `(ms)`.
* perf_analyzer export: `{"experiments": [{"experiment": {"mode", "value"}, "requests":
  [{"timestamp", "request_inputs", "response_timestamps", "response_outputs"}],
  "window_boundaries"}], "version", "service_kind", "endpoint"}`, times in ns since the epoch.

What the figures are (genai_perf/metrics, profile_data_parser):
* `inter_token_latency` from 0.0.3 on is each request's (latency - TTFT) / (output tokens - 1),
  then averaged or ranked over requests: the time per output token, read into the *_tpot_ms
  columns. 0.0.1 – 0.0.2 ranked every gap between responses (divided by the tokens in the later
  response) of every request: inter-token latency, the *_itl_ms columns. A CSV in ns written by
  0.0.2 or 0.0.3 cannot tell which it holds: its figure is kept in metadata_json only.
* `time_to_first_token` of a run that did not stream is the whole response's time: left out.
* `request_count` counts the requests that got a response with text: `completed`. The tool's
  summary says nothing of requests sent or failed; num_prompts and failed stay null. Its
  `num_prompts` / `num_dataset_entries` setting is the size of the prompt set, not a count of
  requests.
* token counts are the tool's tokenizer's count of the text (input_config's tokenizer), not the
  server's.

A per-request record becomes a request row as genai-perf reads it: for an OpenAI endpoint the
responses without text (the role chunk, an empty delta, `[DONE]`, a usage-only chunk) are
dropped first; TTFT is the first remaining response's timestamp minus the request's, the latency
the last one's. A request that was not streamed has no TTFT. Output and input tokens are the
server's `usage` where a response carries one (perf_analyzer records no token counts, and
genai-perf's tokenizer count is not in the file). Response gaps are not token gaps (a response can
carry several tokens): itl_count / itl_sum_s stay null. A request with no response, no response
with text, or an SSE `event: error` keeps its row, with its error.

Points are named from the export the three files share (`point_name`): the summary
`bench/long__c04_genai_perf.json` and the export `bench/long__c04.json` both give `long__c04`, and
`profile_export_genai_perf.json` with concurrency 8 and `profile_export.json` both give
`profile_export__c08`. The export's requests take the point id its summary will have: with the
summary's concurrency where the JSON is beside it, by position (`__i1`) where only the CSV,
which states no concurrency, is.
"""
from __future__ import annotations

import json
import re

from stages.formats.lines import decode
from stages.ingest.parsers.tools.common import BenchParse
from stages.ingest.parsers.tools.genai_perf.csv_export import CSV_HEADERS, parse_csv
from stages.ingest.parsers.tools.genai_perf.export import parse_export
from stages.ingest.parsers.tools.genai_perf.names import (  # noqa: F401 (the package's own names)
    SUMMARY_SUFFIX, TOOL, point_name, to_ms as _ms)
from stages.ingest.parsers.tools.genai_perf.summary import is_summary, parse_summary


# Bytes of a file recognise looks at before it parses anything.
_HEAD = 4096
# A summary is a few KB; a JSON bigger than this is not one (and is not parsed to find out).
_SUMMARY_MAX_BYTES = 16 << 20


_PA_HEAD = re.compile(rb'^\s*\{\s*"experiments"\s*:\s*\[\s*(?:\]|\{\s*"experiment"\s*:\s*\{\s*"mode"\s*:)')


# ---------------------------------------------------------------- recognise

def recognise(name: str, data: bytes) -> bool:
    """GenAI-Perf's summary JSON or CSV, or perf_analyzer's per-request export, by content."""
    return _kind(data) is not None


def _kind(data: bytes) -> str | None:
    head = data[:_HEAD].lstrip(b"\xef\xbb\xbf \t\r\n")
    if _PA_HEAD.match(head):
        return "export"
    if head.startswith((b"Metric,", b"Statistic,")):
        first = decode(head.split(b"\n", 1)[0]).strip()
        return "csv" if tuple(c.strip() for c in first.split(",")) in CSV_HEADERS else None
    if (head.startswith(b"{") and len(data) <= _SUMMARY_MAX_BYTES
            and data.find(b'"input_config"') >= 0):
        try:
            obj = json.loads(decode(data))
        except (json.JSONDecodeError, RecursionError):
            return None
        return "summary" if is_summary(obj) else None
    return None


# ---------------------------------------------------------------- parse

def parse(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """Point rows (summary JSON or CSV) or request rows (perf_analyzer's export) of one file;
    errors, never an exception, for a file that is not what it should be."""
    kind = _kind(data)
    if kind == "export":
        return parse_export(name, data, siblings)
    if kind == "csv":
        return parse_csv(name, data, siblings)
    return parse_summary(name, data)

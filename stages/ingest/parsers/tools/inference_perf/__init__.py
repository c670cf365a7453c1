"""inference-perf (kubernetes-sigs/inference-perf) report files, every release from v0.1.0 on.

The tool writes, per run, JSON reports named `<prefix>stage_<N>_lifecycle_metrics.json` (one per
load stage), `<prefix>summary_lifecycle_metrics.json` (every stage together) and, when
`report.request_lifecycle.per_request` is set, `<prefix>per_request_lifecycle_metrics.json` (one
record per request of every stage). Its local writer indents them (`json.dumps(indent=2)`), its
GCS and S3 writers write one line. They are recognised by their content, whatever their names.

A lifecycle report is `{benchmark_time_seconds (v0.5.0 on), load_summary, successes, failures}`:
`load_summary.count` requests were sent, `successes.count` of them succeeded, `failures.count`
failed. A stage's load_summary also holds `requested_rate` and `achieved_rate` (v0.1.1 on) and,
for a concurrent stage (v0.3.0 on), `concurrency`. Every time is in seconds; each distribution is
{mean, min, max, percentiles}, its median keyed `p50` before v0.2.0 and `median` from v0.2.0.
`time_to_first_token` and `time_per_output_token` ((last token - first token) / (tokens - 1)) are
per request, over the successful requests that streamed two tokens or more;
`inter_token_latency` is every gap between two tokens of those requests; `request_latency` is
end - start of each successful request. Throughputs divide by `benchmark_time_seconds`, the
first start to the last end of the stage's requests.

Each stage report is one point: `common.point_id(name, concurrency, 1)`, concurrency from
`load_summary.concurrency`; a rate stage keeps its `requested_rate` as request_rate. A concurrent
stage's `requested_rate` is not a rate (the tool enqueues all of its `num_requests` within one
second, so it equals num_requests): it is kept in metadata_json only. The summary across stages
is no point of its own (its figures mix the stages): it gives no rows and no error. Neither does a
per-LoRA-adapter report across stages; one per adapter and stage is a point, named by its file.

The per-request records name no stage (the tool drops `stage_id` when it writes them), so their
requests meet a stage's point where the file's name names the point (`<workload>__cNN.` as
report prefix, the same for the stage report beside it) or where one stage report alone is beside
them (a run of one stage); otherwise they are kept under a point of
their own and an error says so. Each record gives start_time, end_time (latency = end - start),
its tokens and the times its tokens arrived: ttft = first token time - start_time (for a request
that streamed two tokens or more, as the tool counts it), the gaps' count and sum from the first
to the last token. inference-perf writes no CSV export.
"""
from __future__ import annotations

import json
import re

from stages.formats.lines import decode
from stages.ingest.parsers.tools.common import BenchParse
from stages.ingest.parsers.tools.inference_perf.lifecycle import TOOL, is_lifecycle, read_report  # noqa: F401
from stages.ingest.parsers.tools.inference_perf.requests import read_requests


# The first bytes of a report as the tool writes it (its key order, any indentation): a lifecycle
# report starts with load_summary (benchmark_time_seconds before it from v0.5.0), whose first key
# is count (the Prometheus reports' load_summary is empty); a per-request report is a list of
# records starting with start_time, end_time. The second per-request shape is the same records
# saved again with sorted keys.
_LIFECYCLE_HEAD = re.compile(
    r'\A\s*\{\s*(?:"benchmark_time_seconds"\s*:\s*[-+0-9.eEinfatyNI]+\s*,\s*)?'
    r'"load_summary"\s*:\s*\{\s*"count"\s*:')
_REQUESTS_HEAD = (
    re.compile(r'\A\s*\[\s*\{\s*"start_time"\s*:\s*[-+0-9.eE]+\s*,\s*"end_time"\s*:'),
    re.compile(r'\A\s*\[\s*\{\s*"end_time"\s*:\s*[-+0-9.eE]+\s*,\s*"error"\s*:'),
)
_HEAD_BYTES = 4096
# A lifecycle report saved with other key order is parsed whole to be recognised, up to this size
# (the tool's own are a few KiB).
_PARSE_TO_RECOGNISE = 8 * 1024 * 1024


def recognise(name: str, data: bytes) -> bool:
    """An inference-perf lifecycle report (stage or summary) or per-request report, by its first
    bytes; a lifecycle report saved with another key order is parsed to be sure. Its Prometheus
    and session reports are not recognised (they hold no client-side benchmark point)."""
    head = decode(data[:_HEAD_BYTES])
    if _LIFECYCLE_HEAD.match(head) or any(p.match(head) for p in _REQUESTS_HEAD):
        return True
    if head.lstrip()[:1] != "{" or '"load_summary"' not in decode(data[:64 * 1024]) \
            or len(data) > _PARSE_TO_RECOGNISE:
        return False
    try:
        obj = json.loads(decode(data))
    except (json.JSONDecodeError, RecursionError):
        return False
    return is_lifecycle(obj)


def parse(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    """The points of a stage report (one), of a summary report (none), or the requests of a
    per-request report; errors, never an exception, for a file that is not what it says."""
    text = decode(data)
    stripped = text.lstrip()
    if stripped.startswith("["):
        return read_requests(name, text, text.count("\n", 0, len(text) - len(stripped)) + 1, siblings)
    return read_report(name, text)

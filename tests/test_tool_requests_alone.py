"""A per-request file kept alone in a run's bench/ (no summary of its tool beside it, as people
often keep only that file) gives its point, made from its records (common.point_from_requests):
AIPerf's profile_export.jsonl (its early shape, `timestamp_ns` and `credit_phase`), LLMPerf's
`*_individual_responses.json`, perf_analyzer's export read by GenAI-Perf's reader and
inference-perf's `per_request_lifecycle_metrics.json` without its stage report. Its counts
are its records, its concurrency the one the records or the names state (else unknown, and said
so), every figure marked as computed from requests; through ingest and derive its median time to
first token and time per output token are those of its successful records, recomputed here by
hand from the file (LLMPerf writes a failed request with zero timings, AIPerf a cancelled one
with only an error: neither counts). The same file beside its summary gives no point of its own
(tests/test_tool_aiperf.py, test_tool_llmperf.py, test_tool_genai_perf.py read those)."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import duckdb
import pytest

from helpers.derive_rows import ingest_and_derive
from stages.ingest.parsers.tools import aiperf, genai_perf, inference_perf, llmperf

TOOLS = Path(__file__).parent / "fixtures" / "bench_tools"
AIPERF_EARLY = TOOLS / "aiperf" / "aiperf_0.1.x_records" / "tiny_reasoner-0.5b-openai-chat-concurrency4"
LLMPERF_V2 = TOOLS / "llmperf" / "v2" / "acme-tiny-chat-1-5_550_150_individual_responses.json"
LLMPERF_FORK = TOOLS / "llmperf" / "fork-2025-10-14" / "acme-tiny-chat-1-5_400_100_individual_responses.json"
GENAI_EXPORT = TOOLS / "genai_perf" / "0.0.15_streaming" / "short_chat__c02.json"
INFERENCE_PERF = TOOLS / "inference_perf" / "v061_per_request_lifecycle_metrics.json"
RULES = {"prefix_cache_tok_s": 10 ** 9, "gate_min_score": 1.0, "cached_share_max_pct": 20,
         "default_max_num_seqs": 256, "burst_tpot_ms": 0.5, "cached_mark_pct": 10}


def _aiperf_records() -> list[dict]:
    return [json.loads(line) for line in (AIPERF_EARLY / "profile_export.jsonl").read_text().splitlines()
            if line.strip()]


def _ms(metric: dict) -> float:
    return metric["value"] * {"ms": 1.0, "sec": 1000.0, "s": 1000.0, "ns": 1e-6}[metric["unit"]]


# what each file alone must give: (run folder's bench path, fixture, point id, concurrency,
# sent, completed, failed, median TTFT s, median TPOT ms), the medians over the successful
# records, recomputed by hand from the file
def _expected() -> dict[str, tuple]:
    records = _aiperf_records()
    ok = [r for r in records if r.get("error") is None]
    aiperf_case = ("tiny_reasoner-0.5b-openai-chat-concurrency4/profile_export.jsonl", AIPERF_EARLY / "profile_export.jsonl",
                   "profile_export_aiperf__c04", 4, len(records), len(ok), len(records) - len(ok),
                   statistics.median(_ms(r["metrics"]["ttft"]) / 1000 for r in ok),
                   statistics.median(_ms(r["metrics"]["inter_token_latency"]) for r in ok))
    out = {"aiperf early, alone": aiperf_case}
    for label, path in (("llmperf v2, alone", LLMPERF_V2), ("llmperf fork, alone", LLMPERF_FORK)):
        rows = json.loads(path.read_text())
        good = [r for r in rows if r["error_code"] is None]
        tpot = "inter_token_latency_s" if "inter_token_latency_s" in rows[0] else "mean_inter_token_latency_s"
        out[label] = (path.name, path, path.name.replace("_individual_responses.json", "__i1"), None,
                      len(rows), len(good), len(rows) - len(good),
                      statistics.median(r["ttft_s"] for r in good),
                      statistics.median(r[tpot] * 1000 for r in good))
    # inference-perf: the first token at output_token_times[0]; the per-token time, as for vLLM's
    # files, the request's time after its first token over its tokens after the first
    # (bench_requests.tpot_from 'latencies'); the failed record (an HTTP 503, no times) does not count
    rows = json.loads(INFERENCE_PERF.read_text())
    good = [r for r in rows if r["error"] is None]
    first = [r["info"]["response_metrics"]["output_token_times"][0] - r["start_time"] for r in good]
    out["inference-perf, alone"] = (
        INFERENCE_PERF.name, INFERENCE_PERF, "v061_per_request_lifecycle_metrics__i1", None,
        len(rows), len(good), len(rows) - len(good), statistics.median(first),
        statistics.median((r["end_time"] - r["start_time"] - t) / (r["info"]["response_metrics"]["output_tokens"] - 1)
                          * 1000 for r, t in zip(good, first)))
    return out


EXPECTED = _expected()


def test_the_hand_counts_see_failed_records():
    """The fixtures hold what the brief names: LLMPerf's failed request with zero timings, AIPerf's
    cancelled record with only an error."""
    v2 = json.loads(LLMPERF_V2.read_text())
    assert [r["ttft_s"] for r in v2 if r["error_code"] is not None] == [0]
    cancelled = [r for r in _aiperf_records() if r.get("error")]
    assert len(cancelled) == 1 and "ttft" not in cancelled[0]["metrics"]
    assert EXPECTED["llmperf v2, alone"][4:7] == (4, 3, 1)
    assert EXPECTED["aiperf early, alone"][4:7] == (5, 4, 1)


def _meta(point: dict) -> dict:
    return json.loads(point["metadata_json"])


def test_aiperf_records_alone_give_their_point_marked_as_computed_from_requests():
    data = (AIPERF_EARLY / "profile_export.jsonl").read_bytes()
    parsed = aiperf.parse(f"bench/{AIPERF_EARLY.name}/profile_export.jsonl", data, frozenset())
    assert parsed.errors == [] and len(parsed.requests) == 5
    [point] = parsed.points
    assert (point["point_id"], point["concurrency"], point["num_prompts"], point["completed"],
            point["failed"]) == ("profile_export_aiperf__c04", 4, 5, 4, 1)
    assert point["summary_paths"] is None and point["tool"] == "aiperf"
    meta = _meta(point)
    assert meta["figures_from"] == "requests" and meta["concurrency"] == 4
    assert meta["concurrency_from"].startswith("the folder's name")
    assert set(meta["computed_from_requests"]) >= {"num_prompts", "completed", "failed", "output_throughput"}
    # output tokens of the successful records over the first start to the last end
    ok = [r for r in _aiperf_records() if r.get("error") is None]
    starts = [r["metadata"]["timestamp_ns"] / 1e9 for r in ok]
    ends = [s + _ms(r["metrics"]["request_latency"]) / 1000 for s, r in zip(starts, ok)]
    tokens = sum(r["metrics"]["output_sequence_length"]["value"] for r in ok)
    assert point["output_throughput"] == pytest.approx(tokens / (max(ends) - min(starts)), rel=1e-12)
    assert point["total_output_tokens"] == tokens == 22


def test_aiperf_records_in_a_folder_that_names_no_concurrency_say_it_is_unknown():
    data = (AIPERF_EARLY / "profile_export.jsonl").read_bytes()
    [point] = aiperf.parse("bench/profile_export.jsonl", data, frozenset()).points
    assert point["point_id"] == "profile_export_aiperf__i1" and point["concurrency"] is None
    assert _meta(point)["concurrency"].startswith("unknown")
    assert "concurrency_from" not in _meta(point)


@pytest.mark.parametrize("beside", ["profile_export_aiperf.json", "profile_export_aiperf.csv",
                                    "profile_export_aiperf.json.gz"])
def test_aiperf_records_beside_their_summary_give_no_point(beside):
    data = (AIPERF_EARLY / "profile_export.jsonl").read_bytes()
    folder = f"bench/{AIPERF_EARLY.name}"
    parsed = aiperf.parse(f"{folder}/profile_export.jsonl", data, frozenset({f"{folder}/{beside}"}))
    assert parsed.points == [] and len(parsed.requests) == 5


@pytest.mark.parametrize("path", [LLMPERF_V2, LLMPERF_FORK], ids=["v2", "fork"])
def test_llmperf_requests_alone_give_their_point_with_concurrency_unknown(path):
    parsed = llmperf.parse(f"bench/{path.name}", path.read_bytes(), frozenset())
    assert parsed.errors == []
    [point] = parsed.points
    label = "llmperf v2, alone" if path == LLMPERF_V2 else "llmperf fork, alone"
    _, _, pid, _, sent, completed, failed, _, _ = EXPECTED[label]
    assert (point["point_id"], point["num_prompts"], point["completed"], point["failed"]) == (
        pid, sent, completed, failed)
    assert point["concurrency"] is None and point["summary_paths"] is None
    meta = _meta(point)
    assert meta["figures_from"] == "requests" and meta["concurrency"].startswith("unknown")
    assert meta["tpot_definition"].startswith("inter_token_latency_s" if path == LLMPERF_V2
                                              else "mean_inter_token_latency_s")
    # v2 records carry no start time: no throughput is made up; the fork's carry start and end
    assert (point.get("output_throughput") is None) == (path == LLMPERF_V2)


def test_llmperf_requests_beside_their_summary_or_in_the_leaderboards_layout_give_no_point():
    data = LLMPERF_V2.read_bytes()
    summary = f"bench/{LLMPERF_V2.name.replace('_individual_responses', '_summary')}"
    assert llmperf.parse(f"bench/{LLMPERF_V2.name}", data, frozenset({summary})).points == []
    # the leaderboard keeps individual/<name>.json and summary/<name>.json in folders side by side
    assert llmperf.parse("bench/individual/acme_7b.json", data, frozenset()).points == []
    # a damaged requests file is not half-read into a point
    assert llmperf.parse(f"bench/{LLMPERF_V2.name}", b'[1, {"ttft_s": 0.1}]', frozenset()).points == []


def test_genai_perf_export_alone_takes_its_concurrency_from_the_experiment():
    parsed = genai_perf.parse(f"bench/{GENAI_EXPORT.name}", GENAI_EXPORT.read_bytes(), frozenset())
    [point] = parsed.points
    experiment = json.loads(GENAI_EXPORT.read_text())["experiments"][0]
    assert experiment["experiment"] == {"mode": "concurrency", "value": 2}
    assert (point["point_id"], point["concurrency"], point["num_prompts"]) == (
        "short_chat__c02", 2, len(experiment["requests"]))
    assert _meta(point)["figures_from"] == "requests"
    beside = frozenset({"bench/short_chat__c02_genai_perf.json"})
    assert genai_perf.parse(f"bench/{GENAI_EXPORT.name}", GENAI_EXPORT.read_bytes(), beside).points == []


def test_inference_perf_requests_alone_give_their_point_beside_a_stage_report_none():
    data = INFERENCE_PERF.read_bytes()
    parsed = inference_perf.parse(f"bench/{INFERENCE_PERF.name}", data, frozenset())
    assert parsed.errors == [] and len(parsed.requests) == 4
    [point] = parsed.points
    assert (point["point_id"], point["concurrency"], point["num_prompts"], point["completed"],
            point["failed"]) == ("v061_per_request_lifecycle_metrics__i1", None, 4, 3, 1)
    meta = _meta(point)
    assert meta["figures_from"] == "requests" and meta["concurrency"].startswith("unknown")
    assert "no stage report" in meta["point_from"]


@pytest.fixture(scope="module")
def derived(tmp_path_factory) -> duckdb.DuckDBPyConnection:
    """One run folder per file, the file alone in its bench/, ingested and derived together."""
    root = tmp_path_factory.mktemp("alone")
    runs = root / "data" / "runs"
    for n, (label, (where, path, *_)) in enumerate(sorted(EXPECTED.items()), 1):
        run = runs / f"tiny-chat__alone{n:02d}__4k__vllm__0415-1620{n:02d}"
        (run / "bench" / where).parent.mkdir(parents=True, exist_ok=True)
        (run / "launch.out").write_text("status=ready\n")
        (run / "bench" / where).write_bytes(path.read_bytes())
    con = duckdb.connect(str(ingest_and_derive(root, RULES)), read_only=True)
    yield con
    con.close()


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_through_derive_the_medians_are_those_of_the_successful_records(derived, label):
    _, _, pid, concurrency, sent, completed, failed, ttft_s, tpot_ms = EXPECTED[label]
    cur = derived.execute("select * from bench_points where point_id = ?", [pid])
    names = [d[0] for d in cur.description]
    [row] = [dict(zip(names, r)) for r in cur.fetchall()]
    assert (row["concurrency"], row["sent"], row["completed"], row["failed"]) == (
        concurrency, sent, completed, failed)
    assert row["figures_from"] == "requests"
    assert row["tpot_from"] == ("latencies" if label.startswith("inference-perf") else "tool request")
    assert row["ttft_requests"] == completed
    assert row["ttft_median_s"] == pytest.approx(ttft_s, rel=1e-12)
    assert row["tpot_median_ms"] == pytest.approx(tpot_ms, rel=1e-12)
    assert row["summary_paths"] is None

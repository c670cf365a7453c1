"""inference-perf reports of every shape its releases write, v0.1.0 to v0.6.1
(tests/fixtures/bench_tools/inference_perf/, its README says which release writes which): each
stage report read to its exact figures in the point columns' units, the summary across stages
to no point, the per-request records to rows with their JSON paths; recognised by content alone,
and nothing of vLLM's or the other tools' taken for it; a damaged file gives errors, never an
exception."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stages.ingest.parsers.bench_json import POINT_COLUMNS
from stages.ingest.parsers.tools import inference_perf as ip
from stages.ingest.parsers.tools import recognised

FIXTURES = Path(__file__).parent / "fixtures"
HERE = FIXTURES / "bench_tools" / "inference_perf"

# fixture -> its one point's figures, in the point columns' units (ms, s, tokens/s, counts)
POINTS = {
    "v010_stage_0_lifecycle_metrics.json": {
        "point_id": "v010_stage_0_lifecycle_metrics__i1", "concurrency": None, "workload": None,
        "num_prompts": 4, "completed": 3, "failed": 1, "request_rate": None, "max_concurrency": None,
        "median_ttft_ms": 140.625, "median_tpot_ms": 33.203125, "median_itl_ms": 31.25,
        "median_e2el_ms": 250.9765625, "output_throughput": 7.492682926829269,
        "request_throughput": 1.4985365853658537, "duration_s": None, "p99_ttft_ms": None,
    },
    "v011_stage_0_lifecycle_metrics.json": {
        "point_id": "v011_stage_0_lifecycle_metrics__i1", "concurrency": None,
        "num_prompts": 4, "completed": 4, "failed": 0, "request_rate": 2.0, "max_concurrency": None,
        "median_ttft_ms": 136.71875, "median_tpot_ms": 33.3984375, "median_itl_ms": 31.25,
        "output_throughput": 11.209633278598796, "duration_s": None,
    },
    "v020_stage_0_lifecycle_metrics.json": {
        "point_id": "v020_stage_0_lifecycle_metrics__i1", "concurrency": None,
        "num_prompts": 4, "completed": 4, "failed": 0, "request_rate": 2.0, "max_concurrency": None,
        "median_ttft_ms": 136.71875, "median_tpot_ms": 33.3984375, "median_itl_ms": 31.25,
        "output_throughput": 11.209633278598796, "duration_s": None,
    },
    "v040_stage_1_lifecycle_metrics.json": {
        "point_id": "v040_stage_1_lifecycle_metrics__c02", "concurrency": 2,
        "workload": "v040_stage_1_lifecycle_metrics",
        "num_prompts": 4, "completed": 4, "failed": 0, "request_rate": None, "max_concurrency": 2,
        "median_ttft_ms": 185.546875, "median_tpot_ms": 33.203125, "median_itl_ms": 33.203125,
        "output_throughput": 18.512994350282487, "request_throughput": 4.628248587570622, "duration_s": None,
    },
    "v050_stage_0_lifecycle_metrics.json": {
        "point_id": "v050_stage_0_lifecycle_metrics__i1", "concurrency": None,
        "num_prompts": 3, "completed": 3, "failed": 0, "request_rate": 1.5,
        "median_ttft_ms": 140.625, "median_tpot_ms": 33.203125, "median_itl_ms": 31.25,
        "output_throughput": 12.075471698113208, "duration_s": 1.2421875,
        "total_input_tokens": None, "total_output_tokens": None,
    },
    "v061_stage_0_lifecycle_metrics.json": {
        "point_id": "v061_stage_0_lifecycle_metrics__i1", "concurrency": None,
        "num_prompts": 4, "completed": 3, "failed": 1, "request_rate": 2.0,
        "median_ttft_ms": 132.8125, "median_tpot_ms": 33.59375, "median_itl_ms": 31.25,
        "output_throughput": 8.967706622879037, "duration_s": 1.7841796875,
        "total_input_tokens": 300, "total_output_tokens": 16,
    },
}
# fixture -> (line, input, output tokens, ttft_s, latency_s, itl_count, itl_sum_s, error) per record
FOUR = [(96, 5, 0.125, 0.2509765625, 4, 0.125, None), (104, 6, 0.15625, 0.3251953125, 5, 0.16796875, None),
        (88, 4, 0.140625, 0.2421875, 3, 0.099609375, None), (100, 5, 0.1328125, 0.2822265625, 4, 0.1484375, None)]
REQUESTS = {
    "v010_per_request_lifecycle_metrics.json": [
        (2, None, None, None, 0.2509765625, None, None, None), (9, None, None, None, 0.3251953125, None, None, None),
        (16, None, None, None, 0.2421875, None, None, None),
        (23, None, None, None, 0.5, None, None, "ClientConnectorError: Cannot connect to host")],
    "v020_per_request_lifecycle_metrics.json": [(1, *r) for r in FOUR],
    "v050_per_request_lifecycle_metrics.json": [(line, *r) for line, r in zip((2, 37, 74), FOUR)],
    "v061_per_request_lifecycle_metrics.json": [
        (2, *FOUR[0]), (49, *FOUR[1]),
        (98, 88, None, None, 0.0625, None, None, 'HTTP Error 503: {"error": {"message": "Service Unavailable"}}'),
        (123, *FOUR[3])],
}
# where each layout keeps a request's tokens and token times
TOKEN_PATHS = {
    "v010_per_request_lifecycle_metrics.json": None,
    "v020_per_request_lifecycle_metrics.json": ("info.input_tokens", "info.output_tokens", "info.output_token_times"),
    "v050_per_request_lifecycle_metrics.json": ("info.input_tokens", "info.response_info.output_tokens",
                                                "info.response_info.output_token_times"),
    "v061_per_request_lifecycle_metrics.json": ("info.request_metrics.text.input_tokens",
                                                "info.response_metrics.output_tokens",
                                                "info.response_metrics.output_token_times"),
}


def read(name: str) -> bytes:
    return (HERE / name).read_bytes()


def one_point(name: str, data: bytes | None = None, as_name: str | None = None) -> dict:
    parsed = ip.parse(as_name or f"bench/{name}", read(name) if data is None else data, frozenset())
    assert parsed.errors == [] and parsed.requests == []
    [point] = parsed.points
    return point


def test_every_fixture_is_covered():
    names = {p.name for p in HERE.glob("*.json")}
    assert names == set(POINTS) | set(REQUESTS) | {"v040_summary_lifecycle_metrics.json"}
    assert all((HERE / n).stat().st_size < 30_000 for n in names)


@pytest.mark.parametrize("name", sorted(POINTS))
def test_each_stage_report_is_read_to_its_exact_figures(name):
    point = one_point(name)
    for column, want in POINTS[name].items():
        assert point.get(column) == want, column
    assert point["tool"] == "inference_perf" and point["tool_version"] is None
    assert point["repeat"] == 1 and point["source_line"] == 1
    assert set(point) <= set(POINT_COLUMNS) | {"point_id", "workload", "concurrency", "repeat", "source_line",
                                               "metadata_json", "tool", "tool_version", "summary_paths"}
    for column in ("num_prompts", "completed", "failed", "total_input_tokens", "total_output_tokens"):
        assert point.get(column) is None or type(point[column]) is int


@pytest.mark.parametrize("name", sorted(POINTS))
def test_times_are_converted_once_from_seconds(name):
    raw = json.loads(read(name))
    point = one_point(name)
    paths = json.loads(point["summary_paths"])
    latency = raw["successes"]["latency"]
    median = "p50" if "p50" in latency["time_to_first_token"] else "median"
    for column, key in (("ttft", "time_to_first_token"), ("tpot", "time_per_output_token"),
                        ("itl", "inter_token_latency"), ("e2el", "request_latency")):
        assert point[f"median_{column}_ms"] == latency[key][median] * 1000.0
        assert point[f"mean_{column}_ms"] == latency[key]["mean"] * 1000.0
        assert paths[f"median_{column}_ms"] == f"successes.latency.{key}.{median}"
    assert point["p90_ttft_ms"] == latency["time_to_first_token"]["p90"] * 1000.0
    assert paths["num_prompts"] == "load_summary.count"
    assert paths["completed"] == "successes.count" and paths["failed"] == "failures.count"
    assert point["output_throughput"] == raw["successes"]["throughput"]["output_tokens_per_sec"]
    assert paths["output_throughput"] == "successes.throughput.output_tokens_per_sec"
    if "benchmark_time_seconds" in raw:
        assert point["duration_s"] == raw["benchmark_time_seconds"]
        assert paths["duration_s"] == "benchmark_time_seconds"


def test_a_concurrent_stage_keeps_its_requested_rate_out_of_request_rate():
    point = one_point("v040_stage_1_lifecycle_metrics.json")
    meta = json.loads(point["metadata_json"])
    assert meta["requested_rate"] == 4.0 and meta["report"] == "stage" and meta["stage"] == 1
    assert "request_rate" not in json.loads(point["summary_paths"])
    assert json.loads(point["summary_paths"])["max_concurrency"] == "load_summary.concurrency"
    assert point["p99_ttft_ms"] == 0.23320312499999998 * 1000.0


def test_the_newest_shape_keeps_its_token_totals_and_failure_labels():
    point = one_point("v061_stage_0_lifecycle_metrics.json")
    paths = json.loads(point["summary_paths"])
    assert paths["total_input_tokens"] == "successes.prompt_tokens.total"
    assert paths["total_output_tokens"] == "successes.output_tokens.total"
    meta = json.loads(point["metadata_json"])
    assert meta["failures_by_label"] == {"503 - Service Unavailable": 1}
    assert meta["cached_prompt_tokens"] == 192.0 and meta["token_count_mismatches"] == 0


def test_the_summary_across_stages_is_no_point():
    for data, name in ((read("v040_summary_lifecycle_metrics.json"), "bench/v040_summary_lifecycle_metrics.json"),
                       (read("v040_summary_lifecycle_metrics.json"), "bench/result.json"),
                       (read("v010_stage_0_lifecycle_metrics.json"), "bench/summary_lifecycle_metrics.json")):
        parsed = ip.parse(name, data, frozenset())
        assert (parsed.points, parsed.requests, parsed.errors) == ([], [], [])


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_each_per_request_report_gives_its_rows_and_their_paths(name):
    parsed = ip.parse(f"bench/{name}", read(name), frozenset())
    # alone in its bench/ (no stage report beside it): its point made from its records
    # (tests/test_tool_requests_alone.py follows one through derive)
    assert [(p["point_id"], json.loads(p["metadata_json"])["figures_from"]) for p in parsed.points] == [
        (name.split(".")[0] + "__i1", "requests")]
    rows = parsed.requests
    want = REQUESTS[name]
    assert [r["request_idx"] for r in rows] == list(range(len(want)))
    for row, (line, inp, out, ttft, latency, itl_n, itl_sum, error) in zip(rows, want):
        got = (row["source_line"], row["input_tokens"], row["output_tokens"], row["ttft_s"], row["latency_s"],
               row["itl_count"], row["itl_sum_s"], row["error"])
        assert got == (line, inp, out, ttft, latency, itl_n, itl_sum, error)
        assert row["record_path"] == f"[{row['request_idx']}]"
        assert row["point_id"] == name.split(".")[0] + "__i1"
        assert row["tpot_ms"] is None
        fields = json.loads(row["field_paths"])
        assert fields["start_time_s"] == "start_time" and fields["latency_s"] == "end_time - start_time"
        paths = TOKEN_PATHS[name]
        if paths and out is not None:
            assert (fields["input_tokens"], fields["output_tokens"], fields["itl_count"]) == paths
            assert fields["ttft_s"] == f"{paths[2]}[0] - start_time"
        if error is not None:
            assert fields["error"] == "error"
    raw = json.loads(read(name))
    assert [r["start_time_s"] for r in rows] == [rec["start_time"] for rec in raw]
    # the requests match the stage's own summary: its median TTFT recomputed from the rows
    stage = name.replace("per_request", "stage_0")
    if stage in POINTS and TOKEN_PATHS[name]:
        ttfts = sorted(r["ttft_s"] for r in rows if r["ttft_s"] is not None and r["error"] is None)
        middle = len(ttfts) // 2
        median = ttfts[middle] if len(ttfts) % 2 else (ttfts[middle - 1] + ttfts[middle]) / 2
        assert median * 1000.0 == POINTS[stage]["median_ttft_ms"]


def test_requests_meet_their_stage_where_the_names_name_the_point():
    stage = ip.parse("bench/chat__c02.stage_0_lifecycle_metrics.json", read("v061_stage_0_lifecycle_metrics.json"),
                     frozenset({"bench/chat__c02.per_request_lifecycle_metrics.json"}))
    requests = ip.parse("bench/chat__c02.per_request_lifecycle_metrics.json",
                        read("v061_per_request_lifecycle_metrics.json"),
                        frozenset({"bench/chat__c02.stage_0_lifecycle_metrics.json"}))
    assert stage.errors == [] and requests.errors == []
    [point] = stage.points
    assert (point["point_id"], point["workload"], point["concurrency"]) == ("chat__c02", "chat", 2)
    assert {r["point_id"] for r in requests.requests} == {"chat__c02"}


def test_requests_no_name_ties_to_a_stage_are_kept_apart_and_said_so():
    parsed = ip.parse("bench/per_request_lifecycle_metrics.json", read("v020_per_request_lifecycle_metrics.json"),
                      frozenset({"bench/stage_0_lifecycle_metrics.json", "bench/summary_lifecycle_metrics.json",
                                 "bench/config.yaml"}))
    assert len(parsed.requests) == 4
    assert {r["point_id"] for r in parsed.requests} == {"per_request_lifecycle_metrics__i1"}
    [error] = parsed.errors
    assert "name no stage" in error.reason and "stage_0_lifecycle_metrics.json" in error.reason


@pytest.mark.parametrize("name", sorted(set(POINTS) | set(REQUESTS) | {"v040_summary_lifecycle_metrics.json"}))
def test_recognised_by_content_under_any_name(name):
    data = read(name)
    assert ip.recognise("result.json", data)
    assert ip.recognise("bench/whatever.txt", data)
    assert recognised("bench/result.json", data) is ip


def test_recognised_and_read_alike_when_saved_again_with_sorted_keys():
    for name in ("v061_stage_0_lifecycle_metrics.json", "v020_stage_0_lifecycle_metrics.json"):
        again = json.dumps(json.loads(read(name)), sort_keys=True, indent=1).encode()
        assert ip.recognise("result.json", again)
        assert one_point(name, again) == one_point(name)
    again = json.dumps(json.loads(read("v061_per_request_lifecycle_metrics.json")), sort_keys=True).encode()
    assert ip.recognise("result.json", again)
    rows = ip.parse("bench/x.json", again, frozenset()).requests
    assert [r["ttft_s"] for r in rows] == [0.125, 0.15625, None, 0.1328125]


def others() -> list[Path]:
    shapes = sorted((FIXTURES / "bench_shapes").glob("*.json"))
    tools = sorted(p for p in (FIXTURES / "bench_tools").rglob("*") if p.is_file() and p.suffix != ".md"
                   and p.relative_to(FIXTURES / "bench_tools").parts[0] != "inference_perf")
    return shapes + tools


@pytest.mark.parametrize("path", others(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_other_tools_files_are_not_recognised(path):
    assert not ip.recognise(path.name, path.read_bytes())


def test_its_prometheus_and_session_reports_and_other_json_are_not_recognised():
    prometheus = {"benchmark_time_seconds": 0.0, "load_summary": {}, "successes": {"count": 3, "rate": 1.0},
                  "failures": {}}
    session = {"stage_metadata": {"stage_id": 0}, "num_sessions": 2, "num_sessions_succeeded": 2}
    for obj in (prometheus, session, {"load_summary": "x"}, [], [1, 2], {}, [{"start_time": 1.0}]):
        assert not ip.recognise("result.json", json.dumps(obj, indent=2).encode())
    assert not ip.recognise("result.json", b"")
    assert not ip.recognise("result.json", b"\x1f\x8b\x08\x00binary")


@pytest.mark.parametrize("name", ["v061_stage_0_lifecycle_metrics.json", "v061_per_request_lifecycle_metrics.json",
                                  "v020_per_request_lifecycle_metrics.json", "v020_stage_0_lifecycle_metrics.json"])
def test_a_truncated_report_gives_an_error_and_nothing_else(name):
    data = read(name)
    for cut in (len(data) // 3, len(data) // 2, len(data) - 2):
        assert ip.recognise("result.json", data[:cut])
        parsed = ip.parse(f"bench/{name}", data[:cut], frozenset())
        assert parsed.points == [] and parsed.requests == []
        assert parsed.errors and "not valid JSON" in parsed.errors[0].reason


def test_malformed_reports_give_errors_never_an_exception():
    cases = [b"", b"   \n", b"{", b"[", b"[1, 2", b'{"load_summary": {"count": 1}}', b"null", b'"text"',
             b'[{"start_time": 1.0, "end_time": 2.0, "request": "", "error": null}] trailing',
             b'[{"start_time": 1.0, "end_time": 2.0, "request": "", "error": null} {"a": 1}]',
             b"\xff\xfe{\x00", b"[" * 100_000]
    for data in cases:
        parsed = ip.parse("bench/result.json", data, frozenset())
        assert parsed.errors and parsed.points == [] and parsed.requests == [], data[:40]


def test_a_stage_with_a_figure_that_is_no_number_is_left_out_with_an_error():
    raw = json.loads(read("v050_stage_0_lifecycle_metrics.json"))
    raw["successes"]["latency"]["time_to_first_token"]["median"] = float("nan")
    parsed = ip.parse("bench/stage_0_lifecycle_metrics.json", json.dumps(raw, indent=2).encode(), frozenset())
    assert parsed.points == []
    [error] = parsed.errors
    assert "successes.latency.time_to_first_token.median is NaN" in error.reason and "left out" in error.reason
    for path, value in ((("successes", "count"), 2.5), (("load_summary", "count"), "4"),
                        (("successes", "throughput", "output_tokens_per_sec"), float("inf")),
                        (("benchmark_time_seconds",), True)):
        raw = json.loads(read("v050_stage_0_lifecycle_metrics.json"))
        node = raw
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
        parsed = ip.parse("bench/stage_0_lifecycle_metrics.json", json.dumps(raw).encode(), frozenset())
        assert parsed.points == [] and len(parsed.errors) == 1, path


def test_a_null_distribution_is_no_figure_and_no_error():
    raw = json.loads(read("v050_stage_0_lifecycle_metrics.json"))
    raw["successes"]["latency"]["time_to_first_token"] = None     # nothing streamed two tokens
    point = one_point("v050_stage_0_lifecycle_metrics.json", json.dumps(raw).encode())
    assert point.get("median_ttft_ms") is None and point["median_tpot_ms"] == 33.203125


def test_a_request_figure_that_is_no_number_is_left_out_of_its_row_with_an_error():
    raw = json.loads(read("v061_per_request_lifecycle_metrics.json"))
    raw[1]["start_time"] = float("nan")
    raw[3]["info"]["response_metrics"]["output_token_times"][2] = "soon"
    raw.insert(2, "not a record")
    parsed = ip.parse("bench/chat__c02.per_request_lifecycle_metrics.json", json.dumps(raw, indent=2).encode(),
                      frozenset())
    assert [r["request_idx"] for r in parsed.requests] == [0, 1, 3, 4]
    second, fifth = parsed.requests[1], parsed.requests[3]
    assert second["start_time_s"] is None and second["latency_s"] is None and second["ttft_s"] is None
    assert second["itl_count"] == 5 and second["output_tokens"] == 6
    assert fifth["ttft_s"] is None and fifth["itl_count"] is None and fifth["latency_s"] == 0.2822265625
    reasons = " | ".join(e.reason for e in parsed.errors)
    assert "record [1]: start_time is NaN" in reasons
    assert "record [2] is not an inference-perf request record" in reasons
    assert "record [4]: info.response_metrics.output_token_times holds a string" in reasons
    assert all(math.isfinite(v) for r in parsed.requests for v in r.values() if isinstance(v, float))

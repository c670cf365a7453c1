"""LLMPerf result files (stages/ingest/parsers/tools/llmperf/): each shape of
tests/fixtures/bench_tools/llmperf/ (its README says which release writes which) read to its exact
figures, the summary and the requests of one run meeting in one point, units converted once, the
files recognised by content whatever their names, other tools' files left alone, and damaged files
giving errors, never an exception."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stages.ingest.parsers.tools import llmperf, recognised

FIXTURES = Path(__file__).parent / "fixtures"
HERE = FIXTURES / "bench_tools" / "llmperf"

V2 = "v2/acme-tiny-chat-1-5_550_150"
BOARD = "leaderboard/{}/acme_7b.json"
FORK = "fork-2025-10-14/acme-tiny-chat-1-5_400_100"
SCHEDULE = "fork-2025-10-14-schedule/2025-10-14T13-31-52_schedule_run/{}.json"

# summary file, requests file, point id, and the figures the summary gives (in the columns' units)
CASES = {
    "v2": (f"{V2}_summary.json", f"{V2}_individual_responses.json",
           "acme-tiny-chat-1-5_550_150__i1", {
        "median_ttft_ms": 300.0, "median_tpot_ms": 25.0, "output_throughput": 45.625,
        "num_prompts": 4, "completed": 3, "failed": 1, "concurrency": 2, "max_concurrency": 2,
        "request_throughput": 0.375, "model_id": "acme/tiny-chat-1.5", "date": "20250412-194552",
        "tool_version": "2023-08-31"}),
    "leaderboard": (BOARD.format("summary"), BOARD.format("individual"), "acme_7b__i1", {
        "median_ttft_ms": 230.0, "median_tpot_ms": 10.927152317880794, "output_throughput": 150.5,
        "num_prompts": 5, "completed": 4, "failed": 1, "concurrency": 5, "request_throughput": 1.0,
        "model_id": "meta-llama/Llama-2-7b-chat-hf", "date": "20231221-052209",
        "tool_version": "2023-08-31"}),
    "fork": (f"{FORK}_summary.json", f"{FORK}_individual_responses.json",
             "acme-tiny-chat-1-5_400_100__i1", {
        "median_ttft_ms": 600.0, "median_tpot_ms": 20.0, "output_throughput": 48.5,
        "num_prompts": 3, "completed": 3, "failed": 0, "concurrency": 2, "request_throughput": 0.5,
        "model_id": "acme/tiny-chat-1.5", "date": "20251014-133230", "tool_version": "2025-10-14"}),
    "schedule": (SCHEDULE.format("summary"), SCHEDULE.format("individual_responses"),
                 "2025-10-14T13-31-52_schedule_run__i1", {
        "median_ttft_ms": 675.0, "median_tpot_ms": 17.979797979797978, "output_throughput": 40.0,
        "num_prompts": 2, "completed": 2, "failed": 0, "concurrency": None, "max_concurrency": None,
        "request_throughput": 0.4, "model_id": "gpt-4o", "date": "20251014-133229",
        "tool_version": "2025-10-14"}),
}


def read(rel: str) -> bytes:
    return (HERE / rel).read_bytes()


def parse(rel: str, name: str | None = None):
    return llmperf.parse(name or rel, read(rel), frozenset())


def the_point(rel: str, name: str | None = None) -> dict:
    parsed = parse(rel, name)
    assert parsed.errors == [] and parsed.requests == []
    assert len(parsed.points) == 1
    return parsed.points[0]


def test_every_fixture_is_a_case():
    listed = {f for s, r, _, _ in CASES.values() for f in (s, r)}
    on_disk = {str(p.relative_to(HERE)) for p in HERE.rglob("*.json")}
    assert listed == on_disk


# ---------------------------------------------------------------- figures

@pytest.mark.parametrize("case", sorted(CASES))
def test_summary_figures(case):
    summary, _, pid, figures = CASES[case]
    point = the_point(summary)
    assert point["point_id"] == pid
    assert point["tool"] == "llmperf" and point["source_line"] == 1 and point["repeat"] == 1
    assert point["workload"] is None
    for column, want in figures.items():
        got = point.get(column)
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-12), column
        else:
            assert got == want, column


@pytest.mark.parametrize("case", sorted(CASES))
def test_summary_and_requests_meet_in_one_point(case):
    summary, requests, pid, figures = CASES[case]
    rows = llmperf.parse(requests, read(requests), frozenset({summary}))  # the summary beside it
    assert rows.errors == [] and rows.points == []
    assert {r["point_id"] for r in rows.requests} == {pid} == {the_point(summary)["point_id"]}
    records = json.loads(read(requests))
    assert [r["request_idx"] for r in rows.requests] == list(range(len(records)))
    assert len(records) == figures["num_prompts"]
    assert sum(r["error"] is None for r in rows.requests) == figures["completed"]


def test_v2_summary_units_and_paths():
    """Seconds to milliseconds, completed requests per minute to per second, Unix seconds to the
    date vLLM writes (UTC), each figure naming the key it came from."""
    raw = json.loads(read(f"{V2}_summary.json"))
    point = the_point(f"{V2}_summary.json")
    paths = json.loads(point["summary_paths"])
    for column, key in [("mean_ttft_ms", "results_ttft_s_mean"),
                        ("median_ttft_ms", "results_ttft_s_quantiles_p50"),
                        ("p90_ttft_ms", "results_ttft_s_quantiles_p90"),
                        ("p99_ttft_ms", "results_ttft_s_quantiles_p99"),
                        ("mean_tpot_ms", "results_inter_token_latency_s_mean"),
                        ("median_tpot_ms", "results_inter_token_latency_s_quantiles_p50"),
                        ("p90_tpot_ms", "results_inter_token_latency_s_quantiles_p90"),
                        ("p99_tpot_ms", "results_inter_token_latency_s_quantiles_p99"),
                        ("mean_e2el_ms", "results_end_to_end_latency_s_mean"),
                        ("median_e2el_ms", "results_end_to_end_latency_s_quantiles_p50")]:
        assert point[column] == raw[key] * 1000.0, column
        assert paths[column] == key
    assert point["request_throughput"] == raw["results_num_completed_requests_per_min"] / 60.0
    assert point["output_throughput"] == raw["results_mean_output_throughput_token_per_s"]
    assert paths["output_throughput"] == "results_mean_output_throughput_token_per_s"
    assert paths["request_throughput"] == "results_num_completed_requests_per_min"
    assert (paths["num_prompts"], paths["completed"], paths["failed"]) == (
        "results_num_requests_started", "results_num_completed_requests", "results_number_errors")
    assert (paths["date"], paths["max_concurrency"], paths["model_id"]) == (
        "timestamp", "num_concurrent_requests", "model")
    assert isinstance(point["num_prompts"], int) and isinstance(point["failed"], int)
    # figures the columns have no place for stay in the file, not in the metadata
    meta = json.loads(point["metadata_json"])
    assert meta["mean_input_tokens"] == 550 and meta["results_error_code_frequency"] == "{429.0: 1}"
    assert meta["timestamp"] == 1744487152 and meta["name"] == "acme-tiny-chat-1-5_550_150_summary"
    assert meta["tpot_definition"].startswith("inter_token_latency_s:")
    assert not any(k.endswith(("_quantiles_p25", "_stddev")) for k in meta)


def test_leaderboard_metadata_and_generated_text():
    meta = json.loads(the_point(BOARD.format("summary"))["metadata_json"])
    assert (meta["framework"], meta["model_size"], meta["api"]) == (
        "acme", "7b", "https://api.acme.example/v1")
    rows = parse(BOARD.format("individual")).requests
    failed = rows[2]
    assert failed["error"] == "-100: Output too few tokens 39"
    assert failed["output_tokens"] == 39 and failed["ttft_s"] == 0.8
    assert failed["generated_text"] == "Thou art"
    assert json.loads(failed["field_paths"])["generated_text"] == "GEN_TEXT"
    assert json.loads(failed["field_paths"])["error"] == "error_code"


def test_v2_requests_rows_and_paths():
    rows = parse(f"{V2}_individual_responses.json").requests
    first, failed = rows[0], rows[2]
    assert first == {
        "point_id": "acme-tiny-chat-1-5_550_150__i1", "request_idx": 0, "error": None,
        "source_line": 2, "record_path": "[0]", "input_tokens": 548, "output_tokens": 125,
        "ttft_s": 0.25, "latency_s": 2.5, "tpot_ms": 20.0,
        "field_paths": json.dumps({"input_tokens": "number_input_tokens",
                                   "latency_s": "end_to_end_latency_s",
                                   "output_tokens": "number_output_tokens",
                                   "tpot_ms": "inter_token_latency_s", "ttft_s": "ttft_s"},
                                  sort_keys=True)}
    assert [r["source_line"] for r in rows] == [2, 13, 24, 35]
    assert [r["record_path"] for r in rows] == ["[0]", "[1]", "[2]", "[3]"]
    assert failed["error"] == "429: Too Many Requests"
    assert (failed["ttft_s"], failed["latency_s"], failed["output_tokens"]) == (0.0, 0.0, 1)
    assert "itl_count" not in first and "itl_sum_s" not in first  # no per-token gaps in the file
    lines = read(f"{V2}_individual_responses.json").decode().split("\n")
    assert all(lines[r["source_line"] - 1].strip() == "{" for r in rows)


def test_fork_requests_keep_start_times_and_their_own_tpot():
    raw = json.loads(read(f"{FORK}_individual_responses.json"))
    rows = parse(f"{FORK}_individual_responses.json").requests
    for row, rec in zip(rows, raw):
        assert row["start_time_s"] == rec["start_time"]
        assert row["tpot_ms"] == rec["mean_inter_token_latency_s"] * 1000.0
        assert row["latency_s"] == rec["end_to_end_latency_s"]
        fields = json.loads(row["field_paths"])
        assert fields["tpot_ms"] == "mean_inter_token_latency_s"
        assert fields["start_time_s"] == "start_time"
    meta = json.loads(the_point(f"{FORK}_summary.json")["metadata_json"])
    assert meta["tpot_definition"].startswith("mean_inter_token_latency_s:")


def test_schedule_mode_summary():
    point = the_point(SCHEDULE.format("summary"))
    paths = json.loads(point["summary_paths"])
    assert paths["median_ttft_ms"] == "ttft_s_quantiles_p50"
    assert paths["median_tpot_ms"] == "mean_inter_token_latency_s_quantiles_p50"
    meta = json.loads(point["metadata_json"])
    assert meta["num_concurrent_requests"] == "scheduled"
    assert (meta["num_launched"], meta["num_unsampled"], meta["wall_time_s"]) == (2, 3, 7.25)
    assert meta["results_subdir"] == "result_outputs/2025-10-14T13-31-52_schedule_run"
    assert "duration_s" not in point


def test_nested_summary_reads_as_flattened():
    """A summary whose statistics are nested objects gives the same figures, each with its path."""
    raw = json.loads(read(f"{V2}_summary.json"))
    nested: dict = {}
    for key, value in raw.items():
        for metric in ("inter_token_latency_s", "ttft_s", "end_to_end_latency_s",
                       "request_output_throughput_token_per_s", "number_input_tokens",
                       "number_output_tokens"):
            head = f"results_{metric}_"
            if key.startswith(head):
                stat = key[len(head):]
                block = nested.setdefault(f"results_{metric}", {})
                if stat.startswith("quantiles_"):
                    block.setdefault("quantiles", {})[stat[len("quantiles_"):]] = value
                else:
                    block[stat] = value
                break
        else:
            nested[key] = value
    data = json.dumps(nested, indent=4).encode()
    assert llmperf.recognise("result.json", data)
    flat_point = the_point(f"{V2}_summary.json")
    parsed = llmperf.parse(f"{V2}_summary.json", data, frozenset())
    assert parsed.errors == []
    point = parsed.points[0]
    for column in ("median_ttft_ms", "median_tpot_ms", "p99_ttft_ms", "mean_e2el_ms",
                   "output_throughput", "num_prompts", "completed", "failed"):
        assert point[column] == flat_point[column], column
    assert json.loads(point["summary_paths"])["median_ttft_ms"] == "results_ttft_s.quantiles.p50"


# ---------------------------------------------------------------- names and ids

def test_a_name_that_names_a_point_is_the_point():
    point = the_point(f"{V2}_summary.json", "bench/long__c04_summary.json")
    assert (point["point_id"], point["workload"], point["concurrency"]) == ("long__c04", "long", 2)
    rows = llmperf.parse("bench/long__c04_individual_responses.json",
                         read(f"{V2}_individual_responses.json"), frozenset()).requests
    assert {r["point_id"] for r in rows} == {"long__c04"}
    point = the_point(f"{V2}_summary.json", "bench/long__c04__r2_summary.json.gz")
    assert (point["point_id"], point["repeat"]) == ("long__c04__r2", 2)


@pytest.mark.parametrize("case", sorted(CASES))
def test_recognised_under_another_name(case):
    for rel in CASES[case][:2]:
        data = read(rel)
        assert llmperf.recognise("result.json", data), rel
        assert recognised("bench/result.json", data) is llmperf, rel
    point = llmperf.parse("bench/result.json", read(CASES[case][0]), frozenset()).points[0]
    assert point["point_id"] == "result__i1"
    assert point["median_ttft_ms"] == pytest.approx(CASES[case][3]["median_ttft_ms"], rel=1e-12)


def others() -> list[Path]:
    files = sorted((FIXTURES / "bench_shapes").glob("*.json"))
    for folder in sorted((FIXTURES / "bench_tools").iterdir()):
        if folder.is_dir() and folder.name != "llmperf":
            files += sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".md")
    return files


@pytest.mark.parametrize("path", others(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_other_tools_files_are_not_llmperf(path):
    assert not llmperf.recognise(path.name, path.read_bytes())


def test_only_llmperf_shapes_are_recognised():
    assert not llmperf.recognise("x.json", b"")
    assert not llmperf.recognise("x.json", b"[]")
    assert llmperf.recognise("bench/x_individual_responses.json", b"[]\n")
    assert not llmperf.recognise("x.json", b'{"num_concurrent_requests": 4}')
    assert not llmperf.recognise("x.json", b'[{"ttft_s": 1, "end_to_end_latency_s": 2}]')
    assert not llmperf.recognise("x.csv", b"concurrency,1\n")
    assert llmperf.parse("bench/x_individual_responses.json", b"[]", frozenset()).requests == []


# ---------------------------------------------------------------- damaged files

@pytest.mark.parametrize("rel", [CASES["v2"][0], CASES["v2"][1], CASES["schedule"][0]])
@pytest.mark.parametrize("keep", [0.1, 0.5, 0.97])
def test_truncated_files_give_errors(rel, keep):
    data = read(rel)
    cut = data[: int(len(data) * keep)]
    assert llmperf.recognise("result.json", cut) or keep < 0.5
    parsed = llmperf.parse(rel, cut, frozenset())
    assert parsed.points == [] and parsed.requests == []
    assert len(parsed.errors) == 1 and "not valid JSON" in parsed.errors[0].reason
    assert parsed.errors[0].line >= 1


@pytest.mark.parametrize("data, words", [
    (b"", "empty"),
    (b"\x00\xff\xfe garbage", "not valid JSON"),
    (b"42", "not the number 42"),
    (b'"text"', "not the string"),
    (b'[1, {"ttft_s": 0.1}]', "record [0] is"),
    (b"{}", "none of LLMPerf's figures"),
    (b'{"num_concurrent_requests": "scheduled", "num_launched": 0}', "none of LLMPerf's figures"),
    (b'{"num_concurrent_requests": 2, "results_num_requests_started": -1}', "not a count"),
    (b'{"results_number_errors": true}', "true/false, not a count"),
])
def test_malformed_files_give_errors(data, words):
    parsed = llmperf.parse("bench/x_individual_responses.json", data, frozenset())
    assert parsed.points == [] and parsed.errors and len(parsed.requests) <= 1
    assert words in " ".join(e.reason for e in parsed.errors)


def with_value(rel: str, key: str, value: str) -> bytes:
    """The file with one key's value replaced by a JSON token (NaN, "x", ...)."""
    text = read(rel).decode()
    old = json.dumps(json.loads(text)[key])
    target = f'"{key}": {old}'
    assert text.count(target) == 1
    return text.replace(target, f'"{key}": {value}').encode()


@pytest.mark.parametrize("key, value", [
    ("results_ttft_s_quantiles_p50", "NaN"),
    ("results_inter_token_latency_s_mean", "Infinity"),
    ("results_mean_output_throughput_token_per_s", '"fast"'),
    ("results_num_completed_requests", "2.5"),
])
def test_a_point_with_a_figure_not_a_number_is_left_out(key, value):
    parsed = llmperf.parse(CASES["v2"][0], with_value(CASES["v2"][0], key, value), frozenset())
    assert parsed.points == []
    assert len(parsed.errors) == 1
    reason = parsed.errors[0].reason
    assert key in reason and "left out" in reason and parsed.errors[0].line == 1


def test_a_run_where_no_request_completed_keeps_its_counts():
    """LLMPerf writes NaN for every statistic when no request succeeded: the point keeps its
    counts, the NaN figures are left out and named in its metadata, with no error."""
    raw = json.loads(read(CASES["v2"][0]))
    for key in raw:
        if key.startswith("results_") and ("_quantiles_" in key
                                           or key.endswith(("_mean", "_stddev"))):
            raw[key] = float("nan")
    raw.update({"results_num_completed_requests": 0, "results_number_errors": 4,
                "results_mean_output_throughput_token_per_s": 0.0,
                "results_num_completed_requests_per_min": 0.0})
    parsed = llmperf.parse(CASES["v2"][0], json.dumps(raw, indent=4).encode(), frozenset())
    assert parsed.errors == []
    point = parsed.points[0]
    assert (point["num_prompts"], point["completed"], point["failed"]) == (4, 0, 4)
    assert "median_ttft_ms" not in point and "median_tpot_ms" not in point
    assert point["output_throughput"] == 0.0
    left_out = json.loads(point["metadata_json"])["left_out"]
    assert "results_ttft_s_quantiles_p50 is NaN" in left_out


def test_a_request_figure_not_a_number_is_left_out_of_its_row():
    text = read(CASES["v2"][1]).decode().replace('"ttft_s": 0.3,', '"ttft_s": NaN,', 1)
    parsed = llmperf.parse(CASES["v2"][1], text.encode(), frozenset())
    assert len(parsed.requests) == 4
    assert "ttft_s" not in parsed.requests[1] and parsed.requests[1]["latency_s"] == 3.2
    assert "ttft_s" not in json.loads(parsed.requests[1]["field_paths"])
    assert len(parsed.errors) == 1 and parsed.errors[0].line == 13
    assert "[1]" in parsed.errors[0].reason and "NaN" in parsed.errors[0].reason


def test_no_nan_reaches_a_row():
    for summary, requests, _, _ in CASES.values():
        for rel in (summary, requests):
            parsed = parse(rel)
            for row in parsed.points + parsed.requests:
                assert not any(isinstance(v, float) and not math.isfinite(v) for v in row.values())

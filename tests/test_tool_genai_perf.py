"""GenAI-Perf's result files (tests/fixtures/bench_tools/genai_perf/, its README says which release
writes which shape): each summary read to its figures in the project's units, with the JSON path or
CSV cell of each; perf_analyzer's per-request export read as genai-perf reads it, into the same
point as the summary; the CSV read only where its JSON is not beside it; other tools' files and
vLLM's left alone; a broken file giving errors, never an exception."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stages.ingest.parsers.tools import genai_perf
from stages.ingest.parsers.tools.common import BenchParse

FIXTURES = Path(__file__).parent / "fixtures"
HERE = FIXTURES / "bench_tools" / "genai_perf"

# The streamed run's summary (ms), as every release that writes it states it.
TTFT = {"mean_ttft_ms": 50.0, "median_ttft_ms": 45.0, "p90_ttft_ms": 71.0, "p99_ttft_ms": 79.1}
TPOT = {"mean_tpot_ms": 11.5, "median_tpot_ms": 11.0, "p90_tpot_ms": 14.1, "p99_tpot_ms": 14.91}
E2EL = {"mean_e2el_ms": 88.0, "median_e2el_ms": 85.0}
NOT_TPOT = ("mean_tpot_ms", "median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms")
NOT_ITL = ("mean_itl_ms", "median_itl_ms")


def read(rel: str, name: str | None = None, beside: bool = True) -> BenchParse:
    """Parse fixture `rel` as `bench/<its name>` (or `name`), the other files of its folder beside it."""
    path = HERE / rel
    name = name or f"bench/{path.name}"
    siblings = frozenset(f"bench/{p.name}" for p in path.parent.iterdir() if p != path and beside)
    data = path.read_bytes()
    assert genai_perf.recognise(name, data)
    return genai_perf.parse(name, data, siblings)


def parse_text(name: str, text: str) -> BenchParse:
    return genai_perf.parse(name, text.encode(), frozenset())


def one_point(parsed: BenchParse) -> dict:
    assert parsed.errors == []
    assert parsed.requests == []
    assert len(parsed.points) == 1
    return parsed.points[0]


def figures_of(point: dict, expected: dict) -> None:
    for column, value in expected.items():
        assert point[column] == pytest.approx(value, rel=1e-12, abs=1e-12), column


def summary(point: dict) -> dict:
    return json.loads(point["summary_paths"])


def meta(point: dict) -> dict:
    return json.loads(point["metadata_json"])


# ---------------------------------------------------------------- summary JSON, every release

def test_0_0_3_json_in_ns():
    point = one_point(read("0.0.3_json_ns/profile_export_genai_perf.json"))
    figures_of(point, {**TTFT, **TPOT, **E2EL, "request_throughput": 21.27659574468085,
                       "output_throughput": 95.74468085106383})
    assert point["median_ttft_ms"] == 45.0 and point["mean_tpot_ms"] == 11.5   # ns / 1e6, exact
    assert {k: point.get(k) for k in ("num_prompts", "completed", "failed")} == dict.fromkeys(
        ("num_prompts", "completed", "failed"))
    assert (point["point_id"], point["workload"], point["concurrency"], point["repeat"]) == (
        "profile_export__c02", "profile_export", 2, 1)
    assert (point["model_id"], point["backend"], point["max_concurrency"]) == ("tiny-chat", "openai", 2)
    assert (point["tool"], point["tool_version"], point["source_line"]) == ("genai_perf", None, 1)
    assert summary(point)["median_ttft_ms"] == "time_to_first_token.p50"
    assert summary(point)["median_tpot_ms"] == "inter_token_latency.p50"
    m = meta(point)
    assert m["format"] == "genai-perf 0.0.3 summary JSON (ns, flat input_config)"
    assert m["prompt_set_size"] == 100          # its num_prompts: the prompt set, not requests sent
    assert m["mean_output_tokens"] == 4.5 and m["streaming"] is True


def test_0_0_9_json_flat():
    point = one_point(read("0.0.9_json_flat/profile_export_genai_perf.json"))
    data = json.loads((HERE / "0.0.9_json_flat/profile_export_genai_perf.json").read_text())
    figures_of(point, {**TTFT, **TPOT, **E2EL})
    assert point["median_ttft_ms"] == data["time_to_first_token"]["p50"]      # ms read as they are
    assert point["p99_tpot_ms"] == data["inter_token_latency"]["p99"]
    assert point["request_throughput"] == data["request_throughput"]["avg"] == 21.27659574468085
    assert point["output_throughput"] == data["output_token_throughput"]["avg"] == 95.74468085106383
    assert "completed" not in point and "num_prompts" not in point and "failed" not in point
    assert point["point_id"] == "profile_export__c02"
    assert summary(point) == {
        "mean_e2el_ms": "request_latency.avg", "median_e2el_ms": "request_latency.p50",
        "mean_ttft_ms": "time_to_first_token.avg", "median_ttft_ms": "time_to_first_token.p50",
        "p90_ttft_ms": "time_to_first_token.p90", "p99_ttft_ms": "time_to_first_token.p99",
        "mean_tpot_ms": "inter_token_latency.avg", "median_tpot_ms": "inter_token_latency.p50",
        "p90_tpot_ms": "inter_token_latency.p90", "p99_tpot_ms": "inter_token_latency.p99",
        "request_throughput": "request_throughput.avg", "output_throughput": "output_token_throughput.avg"}
    m = meta(point)
    assert m["format"] == "genai-perf 0.0.4-0.0.9 summary JSON (ms, flat input_config)"
    assert m["mean_output_tokens_per_s_per_request"] == pytest.approx(53.274369308852066)
    assert m["request_count_setting"] == 0 and "triton_backend" not in m


def test_0_0_15_json_nested_streamed():
    point = one_point(read("0.0.15_streaming/short_chat__c02_genai_perf.json"))
    figures_of(point, {**TTFT, **TPOT, **E2EL, "request_throughput": 21.27659574468085,
                       "output_throughput": 95.74468085106383})
    assert point["completed"] == 4 and isinstance(point["completed"], int)
    assert (point["point_id"], point["workload"], point["concurrency"]) == (
        "short_chat__c02", "short_chat", 2)
    assert summary(point)["completed"] == "request_count.avg"
    m = meta(point)
    assert m["format"] == "genai-perf 0.0.15+ summary JSON (ms, nested input_config)"
    assert (m["mean_ttst_ms"], m["median_ttst_ms"]) == (11.5, 11.0)
    assert m["median_output_tokens_per_s_per_user"] == pytest.approx(91.66666666666666)
    assert m["extra_inputs"] == {"max_tokens": 6}
    assert m["measurement"] == {"mode": "request_count", "num": 4}


def test_0_0_15_json_not_streamed_leaves_its_ttft_out():
    point = one_point(read("0.0.15_not_streamed/profile_export_genai_perf.json"))
    figures_of(point, {"mean_e2el_ms": 43.333333333333336, "median_e2el_ms": 40.0,
                       "request_throughput": 39.473684210526315, "output_throughput": 289.4736842105263})
    assert point["completed"] == 3
    for column in (*TTFT, *NOT_TPOT, *NOT_ITL):
        assert column not in point
    assert "whole response" in meta(point)["ttft_left_out"]
    assert point["point_id"] == "profile_export__c02"


def test_0_0_10_to_0_0_14_json_shapes_built_from_the_fixtures():
    """0.0.10 – 0.0.12: the 0.0.9 shape plus request_count and time_to_second_token;
    0.0.13 – 0.0.14: the 0.0.15 shape without p1, p5, p10."""
    flat = json.loads((HERE / "0.0.9_json_flat/profile_export_genai_perf.json").read_text())
    flat = {"request_throughput": flat.pop("request_throughput"),
            "request_latency": flat.pop("request_latency"),
            "request_count": {"unit": "count", "avg": 4.0}, **flat}
    point = one_point(parse_text("bench/x_genai_perf.json", json.dumps(flat, indent=2)))
    figures_of(point, {**TTFT, **TPOT, **E2EL})
    assert point["completed"] == 4
    assert meta(point)["format"] == "genai-perf 0.0.10-0.0.12 summary JSON (ms, flat input_config)"
    nested = json.loads((HERE / "0.0.15_streaming/short_chat__c02_genai_perf.json").read_text())
    for block in nested.values():
        for stat in ("p1", "p5", "p10"):
            if isinstance(block, dict):
                block.pop(stat, None)
    point = one_point(parse_text("bench/x_genai_perf.json", json.dumps(nested, indent=2)))
    figures_of(point, {**TTFT, **TPOT, **E2EL})
    assert meta(point)["format"] == "genai-perf 0.0.13-0.0.14 summary JSON (ms, nested input_config)"


# ---------------------------------------------------------------- summary CSV, every release

def test_0_0_1_csv_itl_over_every_gap():
    point = one_point(read("0.0.1_csv/profile_export_genai_perf.csv"))
    figures_of(point, {**TTFT, **E2EL, "mean_itl_ms": 10.857143, "median_itl_ms": 10.0,
                       "output_throughput": 95.74, "request_throughput": 21.28})
    for column in NOT_TPOT:
        assert column not in point
    assert "completed" not in point
    assert point["point_id"] == "profile_export__i1" and point["concurrency"] is None
    assert summary(point)["mean_itl_ms"] == 'line 3 "inter_token_latency(ns)" avg'
    assert summary(point)["request_throughput"] == 'line 7 "request_throughput(per sec)" Value'


def test_0_0_2_to_0_0_3_csv_keeps_its_ambiguous_itl_out_of_the_columns():
    point = one_point(read("0.0.2-0.0.3_csv_ns/profile_export_genai_perf.csv"))
    figures_of(point, {**TTFT, **E2EL, "output_throughput": 95.74, "request_throughput": 21.28})
    for column in (*NOT_TPOT, *NOT_ITL):
        assert column not in point
    m = meta(point)
    assert m["itl_figures_ms"] == {"avg": 11.5, "p50": 11.0}
    assert "not told apart" in m["itl_left_out"]
    assert m["format"] == "genai-perf 0.0.2-0.0.3 summary CSV (ns)"


@pytest.mark.parametrize("rel, completed", [
    ("0.0.4-0.0.9_csv/profile_export_genai_perf.csv", None),
    ("0.0.10-0.0.12_csv/profile_export_genai_perf.csv", 4),
])
def test_csv_in_ms(rel, completed):
    point = one_point(read(rel))
    figures_of(point, {**TTFT, **TPOT, **E2EL, "output_throughput": 95.74, "request_throughput": 21.28})
    assert point.get("completed") == completed
    assert summary(point)["median_ttft_ms"] == 'line 2 "Time To First Token (ms)" p50'
    assert meta(point)["format"] == "genai-perf 0.0.4-0.0.14 summary CSV (ms)"


def test_0_0_15_csv_read_alone():
    point = one_point(read("0.0.15_streaming/short_chat__c02_genai_perf.csv", beside=False))
    figures_of(point, {**TTFT, **TPOT, **E2EL, "output_throughput": 95.74, "request_throughput": 21.28})
    assert point["completed"] == 4
    assert summary(point)["output_throughput"] == 'line 11 "Output Token Throughput (tokens/sec)" Value'
    assert point["point_id"] == "short_chat__c02"
    point = one_point(read("0.0.15_not_streamed/profile_export_genai_perf.csv", beside=False))
    figures_of(point, {"mean_e2el_ms": 43.33, "median_e2el_ms": 40.0, "output_throughput": 289.47,
                       "request_throughput": 39.47})
    assert point["completed"] == 3 and "mean_ttft_ms" not in point


@pytest.mark.parametrize("sibling", ["bench/short_chat__c02_genai_perf.json",
                                     "bench/short_chat__c02_genai_perf.json.gz"])
def test_csv_not_read_beside_its_json(sibling):
    data = (HERE / "0.0.15_streaming/short_chat__c02_genai_perf.csv").read_bytes()
    parsed = genai_perf.parse("bench/short_chat__c02_genai_perf.csv", data, frozenset({sibling}))
    assert (parsed.points, parsed.requests, parsed.errors) == ([], [], [])


def test_unit_conversion():
    """ns -> ms by the tool's own division, ms unchanged, seconds from ns for the requests."""
    ns = one_point(read("0.0.3_json_ns/profile_export_genai_perf.json"))
    ms = one_point(read("0.0.9_json_flat/profile_export_genai_perf.json"))
    for column in (*TTFT, *TPOT, *E2EL):
        assert ns[column] == pytest.approx(ms[column], rel=1e-12)
    csv_ns = one_point(read("0.0.2-0.0.3_csv_ns/profile_export_genai_perf.csv"))
    assert csv_ns["p99_ttft_ms"] == 79.1
    assert genai_perf._ms(1_500_000, "ns") == 1.5 and genai_perf._ms(2.25, "ms") == 2.25
    assert genai_perf._ms(1.5, "s") == 1500.0
    with pytest.raises(ValueError):
        genai_perf._ms(1.0, "furlongs")


# ---------------------------------------------------------------- perf_analyzer's per-request export

def test_streamed_requests_meet_their_summary_point():
    parsed = read("0.0.15_streaming/short_chat__c02.json")
    assert parsed.errors == [] and parsed.points == []
    rows = parsed.requests
    assert [r["request_idx"] for r in rows] == [0, 1, 2, 3]
    assert {r["point_id"] for r in rows} == {"short_chat__c02"}
    summary_point = one_point(read("0.0.15_streaming/short_chat__c02_genai_perf.json"))
    assert summary_point["point_id"] == "short_chat__c02"
    assert [r["ttft_s"] for r in rows] == pytest.approx([0.05, 0.08, 0.03, 0.04], abs=1e-12)
    assert [r["latency_s"] for r in rows] == pytest.approx([0.1, 0.116, 0.066, 0.07], abs=1e-12)
    assert [r["start_time_s"] for r in rows] == pytest.approx(
        [1767225600.0, 1767225600.001, 1767225600.101, 1767225600.118], abs=1e-6)
    # the summary's TTFT and latency, recomputed from the rows
    assert sorted(r["ttft_s"] * 1000 for r in rows)[1:3] == pytest.approx([40.0, 50.0])
    assert sum(r["latency_s"] for r in rows) / 4 * 1000 == pytest.approx(summary_point["mean_e2el_ms"])
    for r in rows:
        assert (r["error"], r["input_tokens"], r["output_tokens"]) == (None, None, None)
        assert (r["itl_count"], r["itl_sum_s"], r["tpot_ms"]) == (None, None, None)
        assert r["source_line"] == 1
    assert rows[2]["record_path"] == "experiments[0].requests[2]"
    # the role chunk is response 0: the first text is response 1; the last text precedes the
    # empty delta and [DONE]
    assert json.loads(rows[0]["field_paths"]) == {
        "start_time_s": "timestamp", "ttft_s": "response_timestamps[1] - timestamp",
        "latency_s": "response_timestamps[6] - timestamp"}
    assert json.loads(rows[3]["field_paths"])["latency_s"] == "response_timestamps[3] - timestamp"


def test_requests_not_streamed_have_no_ttft_and_take_the_servers_usage():
    rows = read("0.0.15_not_streamed/profile_export.json").requests
    assert {r["point_id"] for r in rows} == {"profile_export__c02"}
    assert [r["latency_s"] for r in rows] == pytest.approx([0.04, 0.055, 0.035], abs=1e-12)
    assert [r["ttft_s"] for r in rows] == [None, None, None]
    assert [(r["input_tokens"], r["output_tokens"]) for r in rows] == [(123, 8), (101, 8), (136, 8)]
    assert json.loads(rows[1]["field_paths"]) == {
        "start_time_s": "timestamp", "latency_s": "response_timestamps[0] - timestamp",
        "input_tokens": "response_outputs[0].response usage.prompt_tokens",
        "output_tokens": "response_outputs[0].response usage.completion_tokens"}


def test_requests_of_a_csv_alone_meet_its_point_by_position():
    data = (HERE / "0.0.15_streaming/short_chat__c02.json").read_bytes()
    csv_only = genai_perf.parse("bench/profile_export.json", data,
                                frozenset({"bench/profile_export_genai_perf.csv"}))
    assert {r["point_id"] for r in csv_only.requests} == {"profile_export__i1"}
    csv_point = one_point(genai_perf.parse(
        "bench/profile_export_genai_perf.csv",
        (HERE / "0.0.15_streaming/short_chat__c02_genai_perf.csv").read_bytes(), frozenset()))
    assert csv_point["point_id"] == "profile_export__i1"
    with_json = genai_perf.parse("bench/profile_export.json", data, frozenset(
        {"bench/profile_export_genai_perf.csv", "bench/profile_export_genai_perf.json"}))
    assert {r["point_id"] for r in with_json.requests} == {"profile_export__c02"}


def _export(requests: list, service_kind: str = "openai", experiments: list | None = None) -> bytes:
    doc = {"experiments": experiments if experiments is not None else
           [{"experiment": {"mode": "concurrency", "value": 1}, "requests": requests,
             "window_boundaries": []}],
           "version": "2.59.1", "service_kind": service_kind, "endpoint": "v1/chat/completions"}
    return json.dumps(doc, separators=(",", ":")).encode()


def test_request_errors_and_triton_responses():
    stream = '{"model":"m","stream":true}'
    def text(word: str) -> dict:
        return {"response": 'data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"'
                            + word + '"}}]}\n\n'}
    ok = {"timestamp": 10, "request_inputs": {"payload": stream}, "response_timestamps": [20, 30],
          "response_outputs": [text("a"), text("b")]}
    failed = {"timestamp": 11, "request_inputs": {"payload": stream}, "response_timestamps": [25],
              "response_outputs": [{"response": 'event: error\ndata: {"message":"overloaded"}\n\n'}]}
    empty = {"timestamp": 12, "request_inputs": {"payload": stream}, "response_timestamps": [],
             "response_outputs": []}
    no_text = {"timestamp": 13, "request_inputs": {"payload": stream}, "response_timestamps": [40],
               "response_outputs": [{"response": "data: [DONE]\n\n"}]}
    bad = {"timestamp": "soon", "request_inputs": {}, "response_timestamps": [1.5], "response_outputs": []}
    parsed = genai_perf.parse("bench/e.json", _export([ok, failed, empty, no_text, bad, 7]), frozenset())
    rows = parsed.requests
    assert (rows[0]["ttft_s"], rows[0]["latency_s"], rows[0]["error"]) == (10e-9, 20e-9, None)
    assert rows[1]["error"].startswith("error event: event: error") and rows[1]["latency_s"] is None
    assert rows[2]["error"] == "no response"
    assert rows[3]["error"] == "no response with text" and rows[3]["latency_s"] is None
    assert rows[4]["error"] == "response_timestamps is not a list of integers"
    assert rows[4]["start_time_s"] is None
    assert rows[5]["error"] == "not a request record"
    assert rows[5]["record_path"] == "experiments[0].requests[5]"
    assert len(parsed.errors) == 1 and "not request objects" in parsed.errors[0].reason
    triton = {"timestamp": 1, "request_inputs": {"text_input": "hi", "stream": True},
              "response_timestamps": [3, 5, 8],
              "response_outputs": [{"text_output": ""}, {"text_output": "a"}, {"text_output": "b"}]}
    row = genai_perf.parse("bench/t.json", _export([triton], "triton"), frozenset()).requests[0]
    assert (row["ttft_s"], row["latency_s"]) == (2e-9, 7e-9)       # Triton: no response dropped


def test_request_rate_experiments_get_one_point_each():
    experiments = [{"experiment": {"mode": "request_rate", "value": rate}, "window_boundaries": [],
                    "requests": [{"timestamp": 1, "request_inputs": {}, "response_timestamps": [3],
                                  "response_outputs": [{"text_output": "a"}]}]} for rate in (2.0, 4.0)]
    parsed = genai_perf.parse("bench/rates.json", _export([], "triton", experiments), frozenset())
    assert [r["point_id"] for r in parsed.requests] == ["rates__i1", "rates__i2"]
    assert [r["request_idx"] for r in parsed.requests] == [0, 0]


# ---------------------------------------------------------------- recognising files

def test_recognised_under_another_name():
    for rel, pid in (("0.0.15_streaming/short_chat__c02_genai_perf.json", "result__c02"),
                     ("0.0.9_json_flat/profile_export_genai_perf.json", "result__c02"),
                     ("0.0.10-0.0.12_csv/profile_export_genai_perf.csv", "result__i1")):
        data = (HERE / rel).read_bytes()
        name = "bench/result.json" if rel.endswith(".json") else "bench/result.csv"
        assert genai_perf.recognise(name, data)
        assert one_point(genai_perf.parse(name, data, frozenset()))["point_id"] == pid
    data = (HERE / "0.0.15_streaming/short_chat__c02.json").read_bytes()
    assert genai_perf.recognise("bench/result.json", data)
    rows = genai_perf.parse("bench/result.json", data, frozenset()).requests
    assert {r["point_id"] for r in rows} == {"result__c02"}


def test_point_name():
    assert genai_perf.point_name("bench/long__c04_genai_perf.json") == "bench/long__c04.json"
    assert genai_perf.point_name("bench/profile_export_genai_perf.csv.gz") == "bench/profile_export.json"
    assert genai_perf.point_name("bench/result.json") == "bench/result.json"
    assert genai_perf.point_name("bench/_genai_perf.json") == "bench/_genai_perf.json"


def test_other_tools_files_not_recognised():
    others = [p for p in (FIXTURES / "bench_shapes").glob("*.json")]
    others += [p for p in (FIXTURES / "bench_tools").rglob("*")
               if p.is_file() and p.suffix != ".md" and HERE not in p.parents]
    assert len(others) >= 8
    for path in others:
        assert not genai_perf.recognise(f"bench/{path.name}", path.read_bytes()), path


def test_aiperf_shaped_summary_not_recognised():
    aiperf = {"request_throughput": {"unit": "requests/sec", "avg": 1.0},
              "request_latency": {"unit": "ms", "avg": 5.0, "p50": 5.0},
              "input_config": {"endpoint": {"model_names": ["m"], "streaming": True},
                               "loadgen": {"concurrency": 4}, "cli_command": "aiperf profile"}}
    assert not genai_perf.recognise("bench/profile_export_aiperf.json", json.dumps(aiperf, indent=2).encode())
    aiperf_csv = b"Metric,avg,min,max,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\r\n"
    assert not genai_perf.recognise("bench/x.csv", aiperf_csv)
    assert not genai_perf.recognise("bench/x.json", b'{"date": "20250101", "num_prompts": 4}')
    assert not genai_perf.recognise("bench/x.json", b"")


# ---------------------------------------------------------------- broken files

@pytest.mark.parametrize("rel", [
    "0.0.15_streaming/short_chat__c02_genai_perf.json",
    "0.0.15_streaming/short_chat__c02.json",
    "0.0.15_streaming/short_chat__c02_genai_perf.csv",
    "0.0.1_csv/profile_export_genai_perf.csv",
])
def test_truncated_file_gives_errors(rel):
    data = (HERE / rel).read_bytes()
    cut = data[: len(data) // 2]
    parsed = genai_perf.parse(f"bench/{Path(rel).name}", cut, frozenset())
    assert parsed.errors and parsed.points == [] and parsed.requests == []


@pytest.mark.parametrize("data", [b"", b"   \n", b"[1, 2]", b'{"experiments": 3}', b"\xff\xfe garbage",
                                  b'{"experiments":[{"experiment":{"mode":"concurrency","value":1}}]}',
                                  b'{"input_config": {}}', b"Metric,avg,min,max,p99,p95,p90,p75,p50,p25\r\n",
                                  b"Metric,avg,min,max,p99,p95,p90,p75,p50,p25\r\n"
                                  b"Request Latency (ms),1,2\r\n"])
def test_malformed_file_gives_errors_and_no_exception(data):
    for name in ("bench/x_genai_perf.json", "bench/x.json", "bench/x_genai_perf.csv"):
        parsed = genai_perf.parse(name, data, frozenset())
        assert parsed.errors and parsed.points == []


def test_nan_figure_leaves_the_point_out_with_an_error():
    text = (HERE / "0.0.15_streaming/short_chat__c02_genai_perf.json").read_text()
    data = json.loads(text)
    data["time_to_first_token"]["p50"] = float("nan")
    parsed = genai_perf.parse("bench/short_chat__c02_genai_perf.json", json.dumps(data, indent=2).encode(),
                              frozenset())
    assert parsed.points == []
    assert len(parsed.errors) == 1
    assert "time_to_first_token.p50 is NaN" in parsed.errors[0].reason
    assert "short_chat__c02" in parsed.errors[0].reason and parsed.errors[0].line == 1
    data = json.loads(text)
    data["request_count"]["avg"] = "4"
    data["output_token_throughput"]["avg"] = math.inf
    reason = parse_text("bench/y_genai_perf.json", json.dumps(data)).errors[0].reason
    assert "request_count.avg is a string" in reason and "output_token_throughput.avg is infinite" in reason
    csv_text = (HERE / "0.0.10-0.0.12_csv/profile_export_genai_perf.csv").read_text()
    broken = csv_text.replace("Inter Token Latency (ms),11.50", "Inter Token Latency (ms),nan")
    parsed = genai_perf.parse("bench/z_genai_perf.csv", broken.encode(), frozenset())
    assert parsed.points == [] and 'line 5 "Inter Token Latency (ms)" avg is NaN' in parsed.errors[0].reason
    # N/A is the tool's own "none": that figure is left out, the point kept
    na = csv_text.replace("Inter Token Latency (ms),11.50", "Inter Token Latency (ms),N/A")
    point = one_point(genai_perf.parse("bench/z_genai_perf.csv", na.encode(), frozenset()))
    assert "mean_tpot_ms" not in point and point["median_tpot_ms"] == 11.0

"""AIPerf result files (stages/ingest/parsers/tools/aiperf/) in every shape its releases write,
0.1.x to 0.10.x (tests/fixtures/bench_tools/aiperf/, its README says which release writes which):
each read to its exact figures, its per-request file meeting its summary in one point, units
converted once, recognised by content whatever its name, and a damaged file giving errors."""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from stages.ingest.parsers.tools import aiperf, recognised

HERE = Path(__file__).parent / "fixtures"
ROOT = HERE / "bench_tools" / "aiperf"
V01 = "aiperf_0.1.x_records/tiny_reasoner-0.5b-openai-chat-concurrency4"
V02 = "aiperf_0.2.0-0.3.x_flat/short_chat__c02"
V08 = "aiperf_0.8.x_schema1.0"
V010 = "aiperf_0.10.x_schema1.3/tiny-vl-2b-openai-chat-concurrency2"
SUMMARY, CSV, RECORDS = "profile_export_aiperf.json", "profile_export_aiperf.csv", "profile_export.jsonl"

# fixture -> its summary's figures, as the columns hold them
FIGURES = {
    V01: dict(point_id="profile_export_aiperf__c04", workload="profile_export_aiperf", concurrency=4,
              repeat=1, model_id="tiny/reasoner-0.5b", backend="chat", tool_version=None,
              date="2025-10-24T10:00:00.001000", max_concurrency=4,
              num_prompts=5, completed=4, failed=1, mean_ttft_ms=65.6875, median_ttft_ms=66.375,
              p90_ttft_ms=77.075, p99_ttft_ms=79.7075, mean_tpot_ms=11.0, median_tpot_ms=11.0,
              median_itl_ms=12.0, mean_e2el_ms=117.6875, median_e2el_ms=113.0,
              output_throughput=90.44193216855088, request_throughput=16.44398766700925,
              total_token_throughput=None, total_input_tokens=430, total_output_tokens=22,
              duration_s=0.24325),
    V02: dict(point_id="short_chat__c02", workload="short_chat", concurrency=2, repeat=1,
              model_id="tiny/chat-0.5b", backend="chat", tool_version=None, max_concurrency=2,
              num_prompts=5, completed=4, failed=1, mean_ttft_ms=46.0, median_ttft_ms=46.0,
              p90_ttft_ms=50.8, p99_ttft_ms=51.879999999999995, mean_tpot_ms=10.25,
              median_tpot_ms=10.0, median_itl_ms=10.0, mean_e2el_ms=85.0, median_e2el_ms=83.0,
              output_throughput=104.71204188481676, request_throughput=20.94240837696335,
              total_token_throughput=None, total_input_tokens=800, total_output_tokens=20,
              duration_s=0.191),
    V08: dict(point_id="profile_export_aiperf__c04", workload="profile_export_aiperf", concurrency=4,
              repeat=1, model_id="tiny-mock", backend="chat", tool_version="0.8.0", max_concurrency=4,
              num_prompts=8, completed=6, failed=2, mean_ttft_ms=35.666666666666664,
              median_ttft_ms=35.0, p90_ttft_ms=41.5, p99_ttft_ms=44.650000000000006,
              mean_tpot_ms=5.166666666666668, median_tpot_ms=5.0, median_itl_ms=5.0,
              mean_e2el_ms=56.33333333333334, median_e2el_ms=56.5,
              output_throughput=247.93388429752068, request_throughput=49.586776859504134,
              total_token_throughput=6595.0413223140495, total_input_tokens=768,
              total_output_tokens=30, duration_s=0.121),
    V010: dict(point_id="profile_export_aiperf__c02", workload="profile_export_aiperf", concurrency=2,
               repeat=1, model_id="tiny-vl-2b", backend="chat", tool_version="0.10.0",
               max_concurrency=2, num_prompts=4, completed=4, failed=0,
               mean_ttft_ms=143.75000000000003, median_ttft_ms=135.0, p90_ttft_ms=192.0,
               p99_ttft_ms=208.2, mean_tpot_ms=22.25, median_tpot_ms=22.5, median_itl_ms=21.0,
               mean_e2el_ms=243.0, median_e2el_ms=226.5, output_throughput=40.44117647058823,
               request_throughput=7.352941176470588, total_token_throughput=6891.544117647059,
               total_input_tokens=3727, total_output_tokens=22, duration_s=0.544),
}
# fixture -> (requests, of them failed,
#             (ttft_s, tpot_ms, itl_count, output_tokens) of the first that succeeded)
REQUESTS = {
    V01: (5, 1, (0.05, 10.0, 4, 5)),
    V02: (5, 1, (0.04, 10.0, 3, 4)),
    V010: (4, 0, (0.12, 24.0, 5, 6)),
}


def files(folder: str) -> frozenset[str]:
    return frozenset(f"bench/{p.name}" for p in (ROOT / folder).iterdir())


def read(folder: str, filename: str, siblings: frozenset[str] | None = None, data: bytes | None = None):
    """The fixture's file parsed as a run folder holds it: bench/<its folder>/<its name>."""
    name = f"bench/{Path(folder).name}/{filename}"
    sibs = siblings if siblings is not None else frozenset(
        f"bench/{Path(folder).name}/{p.name}" for p in (ROOT / folder).iterdir() if p.name != filename)
    return aiperf.parse(name, data if data is not None else (ROOT / folder / filename).read_bytes(), sibs)


def close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(b, str) or isinstance(a, str):
        return a == b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def test_every_fixture_is_listed():
    readme = (ROOT / "README.md").read_text()
    for folder in FIGURES:
        assert f"`{folder}/`" in readme or f"`{folder.split('/')[0]}/" in readme, folder
    assert set(FIGURES) == {str(p.parent.relative_to(ROOT)) for p in ROOT.rglob(SUMMARY)}
    assert all(p.stat().st_size < 30_000 for p in ROOT.rglob("*") if p.is_file())


@pytest.mark.parametrize("folder", list(FIGURES))
def test_summary_read_to_its_exact_figures(folder):
    parsed = read(folder, SUMMARY)
    assert parsed.errors == [] and parsed.requests == []
    [point] = parsed.points
    for column, expected in FIGURES[folder].items():
        assert close(point.get(column), expected), (column, point.get(column), expected)
    assert point["tool"] == "aiperf" and point["source_line"] == 1
    assert isinstance(point["completed"], int) and isinstance(point["num_prompts"], int)
    paths = json.loads(point["summary_paths"])
    prefix = "records." if folder == V01 else ""
    ttft = "ttft" if folder == V01 else "time_to_first_token"
    assert paths["median_ttft_ms"] == f"{prefix}{ttft}.p50"
    assert paths["median_tpot_ms"] == f"{prefix}inter_token_latency.p50"
    assert paths["median_itl_ms"] == f"{prefix}inter_chunk_latency.p50"
    assert paths["output_throughput"] == f"{prefix}output_token_throughput.avg"
    assert paths["completed"] == f"{prefix}request_count.avg"
    assert paths["total_output_tokens"] == f"{prefix}total_osl.avg"  # reasoning tokens included
    assert "num_prompts" not in paths  # sent = succeeded + failed, not a figure of the file
    meta = json.loads(point["metadata_json"])
    assert meta["num_prompts_from"] == "completed + failed"
    if folder == V010:
        assert meta["failed_from"] == "error_summary[*].count"  # no error_request_count: none failed
        assert meta["warmup_request_count"] == 2 and meta["trial"] == 0
        assert meta["cli_command"].startswith("aiperf profile --model 'tiny-vl-2b'")
    else:
        assert paths["failed"] == f"{prefix}error_request_count.avg"


def test_each_release_layout_and_its_settings():
    v01 = json.loads(read(V01, SUMMARY).points[0]["metadata_json"])
    assert v01["errors"] == {"RequestCancellationError": 1}
    assert v01["request_cancellation_rate"] == 20.0 and v01["request_count"] == 5
    v08 = json.loads(read(V08, SUMMARY).points[0]["metadata_json"])
    assert v08["schema_version"] == "1.0" and v08["phase_type"] == "concurrency"
    assert v08["errors"] == {"ClientConnectorError": 2}
    # the 0.1.x summary's total_output_tokens leaves reasoning tokens out: not the column's figure
    doc = json.loads((ROOT / V01 / SUMMARY).read_text())
    assert doc["records"]["total_output_tokens"]["avg"] == 10.0  # 12 of the 22 are reasoning tokens
    assert doc["records"]["total_osl"]["avg"] == 22.0


@pytest.mark.parametrize("folder", list(REQUESTS))
def test_requests_meet_their_summary_in_one_point(folder):
    summary = read(folder, SUMMARY).points[0]
    parsed = read(folder, RECORDS)
    assert parsed.errors == [] and parsed.points == []
    count, failed, first = REQUESTS[folder]
    assert len(parsed.requests) == count
    assert {r["point_id"] for r in parsed.requests} == {summary["point_id"]}
    assert [r["request_idx"] for r in parsed.requests] == list(range(count))
    assert [r["source_line"] for r in parsed.requests] == list(range(1, count + 1))
    assert all(r["record_path"] is None for r in parsed.requests)
    bad = [r for r in parsed.requests if r["error"] is not None]
    assert len(bad) == failed == summary["failed"]
    ok = [r for r in parsed.requests if r["error"] is None]
    assert len(ok) == summary["completed"]
    assert (ok[0]["ttft_s"], ok[0]["tpot_ms"], ok[0]["itl_count"], ok[0]["output_tokens"]) == \
        pytest.approx(first, rel=1e-12)
    # the summary's medians are the requests' own
    median_ttft_s = statistics.median(r["ttft_s"] for r in ok)
    assert median_ttft_s * 1000 == pytest.approx(summary["median_ttft_ms"], rel=1e-12)
    assert statistics.median(r["tpot_ms"] for r in ok) == pytest.approx(summary["median_tpot_ms"], rel=1e-12)
    for r in ok:  # latency = TTFT + the gaps between chunks; TPOT = (latency - TTFT) / (output - 1)
        assert r["latency_s"] == pytest.approx(r["ttft_s"] + r["itl_sum_s"], rel=1e-9)
        tpot_ms = (r["latency_s"] - r["ttft_s"]) * 1000 / (r["output_tokens"] - 1)
        assert r["tpot_ms"] == pytest.approx(tpot_ms, rel=1e-9)
        assert r["start_time_s"] > 1.7e9  # epoch seconds, from nanoseconds
    paths = json.loads(ok[0]["field_paths"])
    ttft = "ttft" if folder == V01 else "time_to_first_token"
    assert paths["ttft_s"] == f"metrics.{ttft}.value"
    assert paths["tpot_ms"] == "metrics.inter_token_latency.value"
    assert paths["latency_s"] == "metrics.request_latency.value"
    assert paths["output_tokens"] == "metrics.output_sequence_length.value"
    assert paths["itl_count"] == paths["itl_sum_s"] == "metrics.inter_chunk_latency.value"
    start = "metadata.timestamp_ns" if folder == V01 else "metadata.request_start_ns"
    assert paths["start_time_s"] == start
    if bad:
        assert json.loads(bad[0]["field_paths"])["error"] == "error"
        assert bad[0]["ttft_s"] is None and bad[0]["itl_count"] is None


def test_request_errors_as_the_tool_records_them():
    [cancelled] = [r for r in read(V01, RECORDS).requests if r["error"]]
    assert cancelled["error"] == "RequestCancellationError (499): Request was cancelled after 0.000 seconds"
    [failed] = [r for r in read(V02, RECORDS).requests if r["error"]]
    assert failed["error"] == "InternalServerError (500): Server encountered an internal error"
    assert failed["input_tokens"] == 200 and failed["request_idx"] == 2  # error_isl; file order


@pytest.mark.parametrize("folder", [V01, V02, V010])
def test_csv_read_only_without_its_json(folder):
    assert read(folder, CSV).points == [] and read(folder, CSV).errors == []  # the JSON is beside it
    parsed = read(folder, CSV, siblings=frozenset({f"bench/{Path(folder).name}/{RECORDS}"}))
    assert parsed.errors == []
    [point] = parsed.points
    json_point = FIGURES[folder]
    assert point["point_id"] == json_point["point_id"]  # from names alone: folder or file
    for column in ("median_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput",
                   "mean_e2el_ms", "duration_s", "request_throughput"):
        assert point[column] == round(json_point[column], 2), column
    assert point["completed"] == json_point["completed"]
    if folder == V010:  # no Error Request Count row where none failed: nothing said of failures
        assert point.get("failed") is None and point.get("num_prompts") is None
    else:
        assert (point["failed"], point["num_prompts"]) == (json_point["failed"], json_point["num_prompts"])
    assert point.get("model_id") is None  # the CSV holds no settings
    paths = json.loads(point["summary_paths"])
    assert paths["median_ttft_ms"].startswith("line ") and paths["median_ttft_ms"].endswith("column p50")
    assert paths["completed"].endswith("column Value")


def test_csv_lines_and_cells():
    parsed = read(V010, CSV, siblings=frozenset())
    paths = json.loads(parsed.points[0]["summary_paths"])
    lines = (ROOT / V010 / CSV).read_text().splitlines()  # CRLF as the csv module writes it
    n = int(paths["median_ttft_ms"].split()[1].rstrip(","))
    assert lines[n - 1].startswith("Time to First Token (ms),")
    n = int(paths["output_throughput"].split()[1].rstrip(","))
    assert lines[n - 1].startswith("Output Token Throughput (tokens/sec),40.44")


def test_units_converted_once():
    doc = json.loads((ROOT / V08 / SUMMARY).read_text())
    block = doc["time_to_first_token"]
    doc["time_to_first_token"] = {"unit": "sec", **{k: v / 1000 for k, v in block.items() if k != "unit"}}
    itl = doc["inter_token_latency"]
    doc["inter_token_latency"] = {"unit": "ns", **{k: v * 1e6 for k, v in itl.items() if k != "unit"}}
    doc["benchmark_duration"] = {"unit": "ms", "avg": 121.0}
    point = read(V08, SUMMARY, data=json.dumps(doc).encode()).points[0]
    assert point["median_ttft_ms"] == pytest.approx(35.0, rel=1e-12)
    assert point["median_tpot_ms"] == pytest.approx(5.0, rel=1e-12)
    assert point["duration_s"] == pytest.approx(0.121, rel=1e-12)
    line = json.loads((ROOT / V010 / RECORDS).read_text().splitlines()[0])
    line["metrics"]["time_to_first_token"] = {"value": 120_000_000, "unit": "ns"}
    line["metrics"]["request_latency"] = {"value": 0.24, "unit": "sec"}
    [req] = read(V010, RECORDS, data=json.dumps(line).encode()).requests
    assert req["ttft_s"] == pytest.approx(0.12) and req["latency_s"] == pytest.approx(0.24)
    assert req["tpot_ms"] == 24.0  # ms stays ms


def test_unknown_unit_is_not_guessed():
    doc = json.loads((ROOT / V08 / SUMMARY).read_text())
    doc["time_to_first_token"]["unit"] = "ticks"
    doc["output_token_throughput"]["unit"] = "tokens/min"
    parsed = read(V08, SUMMARY, data=json.dumps(doc).encode())
    assert parsed.points == []
    [error] = parsed.errors
    assert "time_to_first_token.avg is in unknown unit 'ticks'" in error.reason
    assert "output_token_throughput.avg is in unit 'tokens/min'" in error.reason


def test_nan_figure_leaves_the_point_out_with_an_error():
    text = (ROOT / V02 / SUMMARY).read_text()
    doc = json.loads(text)
    doc["time_to_first_token"]["p50"] = float("nan")
    doc["request_count"]["avg"] = "4"
    parsed = read(V02, SUMMARY, data=json.dumps(doc).encode())  # json writes the bare token NaN
    assert b"NaN" in json.dumps(doc).encode()
    assert parsed.points == []
    [error] = parsed.errors
    assert error.line == 1
    assert "short_chat__c02: time_to_first_token.p50 is NaN" in error.reason
    assert "request_count.avg is a string" in error.reason and "left out" in error.reason
    # a null statistic is simply not given
    doc = json.loads(text)
    doc["time_to_first_token"]["p99"] = None
    point = read(V02, SUMMARY, data=json.dumps(doc).encode()).points[0]
    assert "p99_ttft_ms" not in point and point["median_ttft_ms"] == 46.0


def test_nan_in_a_request_leaves_the_requests_out():
    lines = (ROOT / V02 / RECORDS).read_text().splitlines()
    record = json.loads(lines[1])
    record["metrics"]["time_to_first_token"]["value"] = float("nan")
    lines[1] = json.dumps(record)
    parsed = read(V02, RECORDS, data="\n".join(lines).encode())
    assert parsed.requests == []
    assert parsed.errors[0].line == 2
    assert "metrics.time_to_first_token.value is NaN" in parsed.errors[0].reason
    assert "its requests are left out" in parsed.errors[-1].reason


@pytest.mark.parametrize("folder,filename", [(V01, SUMMARY), (V08, SUMMARY), (V010, SUMMARY), (V010, RECORDS),
                                             (V02, RECORDS), (V02, CSV)])
def test_truncated_file_gives_errors_never_an_exception(folder, filename):
    data = (ROOT / folder / filename).read_bytes()
    for cut in (len(data) // 3, len(data) // 2, len(data) - 7):
        part = data[:cut]
        assert aiperf.recognise(f"bench/{filename}", part)
        parsed = read(folder, filename, siblings=frozenset(), data=part)
        if filename == CSV:  # a table cut short: the rows before the cut, or errors
            assert parsed.points or parsed.errors
            continue
        assert parsed.errors, cut
        assert parsed.points == [] and parsed.requests == []


def test_malformed_files_give_errors():
    for data in (b"", b"{", b'{"aiperf_version": "0.8.0", "request_count": [', b"\xff\xfe\x00{}",
                 b'{"aiperf_version": "0.8.0"}', b"[1, 2, 3]", b'{"input_config": "x"}'):
        parsed = aiperf.parse("bench/profile_export_aiperf.json", data, frozenset())
        assert parsed.points == [] and parsed.requests == [] and parsed.errors, data
    parsed = aiperf.parse("bench/profile_export.jsonl", b'{"metadata": {"worker_id": "w", "credit_phase": '
                          b'"profiling"}, "metrics": {}}\n[1]\n{"metadata": 3}\n', frozenset())
    assert parsed.requests == [] and len(parsed.errors) == 3
    rows = "Metric,avg,min,max,p1,p5,p25,p50,p75,p90,p95,p99,std\nTime to First Token (ms),1,2\n"
    parsed = aiperf.parse("bench/profile_export_aiperf.csv", rows.encode(), frozenset())
    assert parsed.points == [] and parsed.errors


def test_recognised_by_content_whatever_its_name():
    for folder in FIGURES:
        for path in (ROOT / folder).iterdir():
            if path.suffix in (".json", ".jsonl", ".csv"):
                data = path.read_bytes()
                assert aiperf.recognise("result.json", data), path
                assert recognised("bench/result.json", data) is aiperf, path
    parsed = aiperf.parse("bench/result.json", (ROOT / V08 / SUMMARY).read_bytes(), frozenset())
    assert parsed.points[0]["point_id"] == "result__c04"


def test_other_tools_files_are_not_recognised():
    others = sorted(HERE.glob("bench_shapes/*.json"))
    others += [p for p in (HERE / "bench_tools").rglob("*") if p.is_file()
               and ROOT not in p.parents and p.suffix != ".md"]
    assert others
    for path in others:
        assert not aiperf.recognise(path.name, path.read_bytes()), path
    # GenAI-Perf's summary has AIPerf's metric layout, but its own settings
    genai_perf = {"request_throughput": {"unit": "requests/sec", "avg": 2.5},
                  "time_to_first_token": {"unit": "ms", "avg": 20.0, "p50": 19.0},
                  "input_config": {"model": ["gpt2"], "endpoint": "v1/chat/completions",
                                   "endpoint_type": "chat", "service_kind": "openai", "streaming": True,
                                   "concurrency": 4, "u": "localhost:8000"}}
    assert not aiperf.recognise("profile_export_genai_perf.json", json.dumps(genai_perf).encode())
    genai_csv = b"Metric,avg,min,max,p99,p95,p90,p75,p50,p25\nTime To First Token (ms),1,1,1,1,1,1,1,1,1\n"
    assert not aiperf.recognise("profile_export_genai_perf.csv", genai_csv)
    perf_analyzer = {"service_kind": "openai", "endpoint": "v1/chat/completions",
                     "experiments": [{"experiment": {"mode": "concurrency", "value": 4}, "requests": []}]}
    assert not aiperf.recognise("profile_export.json", json.dumps(perf_analyzer).encode())
    # AIPerf's other files: time slices, raw records
    timeslices = {"timeslices": [{"timeslice_index": 0}], "input_config": {"loadgen": {"concurrency": 2}}}
    assert not aiperf.recognise("profile_export_aiperf_timeslices.json", json.dumps(timeslices).encode())
    raw = {"metadata": {"worker_id": "w", "benchmark_phase": "profiling"}, "start_perf_ns": 1,
           "responses": []}
    assert not aiperf.recognise("profile_export_raw.jsonl", json.dumps(raw).encode())


def test_point_named_by_file_folder_or_summary():
    data = (ROOT / V010 / RECORDS).read_bytes()
    summary = (ROOT / V010 / SUMMARY).read_bytes()
    # --profile-export-prefix long__c08: long__c08.json and long__c08.jsonl
    assert aiperf.parse("bench/long__c08.jsonl", data, frozenset()).requests[0]["point_id"] == "long__c08"
    assert aiperf.parse("bench/long__c08.json", summary, frozenset()).points[0]["point_id"] == "long__c08"
    # a folder named as a point
    requests = aiperf.parse("bench/long__c08__r2/profile_export.jsonl", data, frozenset()).requests
    assert requests[0]["point_id"] == "long__c08__r2"
    point = aiperf.parse("bench/long__c08__r2/profile_export_aiperf.json", summary, frozenset()).points[0]
    assert (point["point_id"], point["workload"], point["concurrency"], point["repeat"]) == \
        ("long__c08__r2", "long", 8, 2)
    assert point["max_concurrency"] == 2  # what the file says it ran


def test_request_file_whose_point_no_name_states():
    """The concurrency of a folder like `c2` is inside the summary only, which the request file
    is not given: its requests are named by the summary's stem alone, and the error says so."""
    data = (ROOT / V010 / RECORDS).read_bytes()
    beside = frozenset({"bench/c2/profile_export_aiperf.json"})
    parsed = aiperf.parse("bench/c2/profile_export.jsonl", data, beside)
    assert {r["point_id"] for r in parsed.requests} == {"profile_export_aiperf__i1"}
    [error] = parsed.errors
    assert "concurrency is stated only inside profile_export_aiperf.json" in error.reason
    alone = aiperf.parse("bench/c2/profile_export.jsonl", data, frozenset())
    assert alone.errors == [] and alone.requests[0]["point_id"] == "profile_export_aiperf__i1"


def test_warmup_records_and_trials():
    lines = (ROOT / V010 / RECORDS).read_text().splitlines()
    warm = json.loads(lines[0])
    warm["metadata"]["benchmark_phase"] = "warmup"
    parsed = read(V010, RECORDS, data="\n".join([json.dumps(warm)] + lines).encode())
    assert len(parsed.requests) == 4 and parsed.requests[0]["source_line"] == 2
    doc = json.loads((ROOT / V010 / SUMMARY).read_text())
    doc["run_info"]["trial"] = 2
    assert read(V010, SUMMARY, data=json.dumps(doc).encode()).points[0]["repeat"] == 3


def test_gzipped_names_and_sibling_forms():
    csv_data = (ROOT / V02 / CSV).read_bytes()
    for sibling in ("profile_export_aiperf.json", "bench/short_chat__c02/profile_export_aiperf.json.gz"):
        assert aiperf.parse("bench/short_chat__c02/profile_export_aiperf.csv.gz", csv_data,
                            frozenset({sibling})).points == []
    # a summary of another folder is no sibling
    assert aiperf.parse("bench/short_chat__c02/profile_export_aiperf.csv", csv_data,
                        frozenset({"bench/other/profile_export_aiperf.json"})).points

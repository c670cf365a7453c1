"""GuideLLM reports (stages/ingest/parsers/tools/guidellm/): every shape from 0.1 to 0.8, JSON,
YAML and CSV (tests/fixtures/bench_tools/guidellm/, its README says which release writes which),
read to their exact figures, each figure's path leading back to the value in the file."""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from stages.ingest.parsers import tools
from stages.ingest.parsers.tools import common, guidellm

FIXTURES = Path(__file__).parent / "fixtures" / "bench_tools"
HERE = FIXTURES / "guidellm"
SHAPES = Path(__file__).parent / "fixtures" / "bench_shapes"

# fixture -> each point: id, concurrency, rate, median TTFT, median TPOT, output tok/s, sent,
# completed, failed, request rows, tool version
POINTS = {
    "guidellm_v01_report.json": [
        ("benchmarks__c01", 1, None, None, None, None, 3, 3, 0, 3, None),
        ("benchmarks__i2", None, 2.0, None, None, None, 3, 2, 1, 3, None)],
    "guidellm_v02-v03_concurrent.json": [
        ("benchmarks__c02", 2, None, 22.0, 6.143, 90.91, 4, 3, 1, 4, None)],
    "guidellm_v02-v03_rate.yaml": [
        ("benchmarks__i1", None, 1.5, 19.0, 5.571, 11.88, 4, 3, 0, 4, None)],
    "guidellm_v02-v03_export.csv": [
        ("benchmarks__c01", 1, None, 17.0, 5.0, 53.22, 3, 3, 0, 0, None),
        ("benchmarks__c02", 2, None, 22.0, 6.143, 90.91, 4, 3, 1, 0, None)],
    "guidellm_v04_benchmarks.json": [
        ("benchmarks__c02", 2, None, 125.0, 31.19, 21.33, 2, 1, 1, 2, None)],
    "guidellm_v05-v06_benchmarks.json": [
        ("benchmarks__c01", 1, None, 62.0, 20.53, 3.333, 1, 1, 0, 1, "0.5.0")],
    "guidellm_v05-v06_export.csv": [
        ("benchmarks__c01", 1, None, 62.0, 20.53, 3.333, 1, 1, 0, 0, "0.5.0")],
    "guidellm_v07_benchmarks.json": [
        ("benchmarks__i1", None, 2.0, 50.0, 12.46, 6.0, 2, 1, 0, 2, "0.7.3")],
    "guidellm_v07_export.csv": [
        ("benchmarks__i1", None, 2.0, 50.0, 12.46, 6.0, 2, 1, 0, 0, "0.7.3")],
    # report schema 2 as 0.8 writes it (the 0.8.0 development line released as 0.8.0, 0.8.1): a
    # constant rate, its time to first token read
    "guidellm_v08_constant.json": [
        ("benchmarks__i1", None, 2.0, 50.0, 12.46, 6.0, 2, 1, 0, 2, "0.8.1")],
}


def parsed(fixture: str, name: str | None = None, siblings: frozenset[str] = frozenset(),
           data: bytes | None = None) -> common.BenchParse:
    suffix = fixture.rsplit(".", 1)[1]
    return guidellm.parse(name or f"bench/benchmarks.{suffix}", data or (HERE / fixture).read_bytes(), siblings)


def test_every_fixture_is_covered_and_small():
    files = {p.name for p in HERE.iterdir() if p.name != "README.md"}
    assert files == set(POINTS)
    # 0.8's schema 2 adds four latency distributions and two interval fields to each of them
    assert all((HERE / f).stat().st_size < (40 if "v08" in f else 30) * 1024 for f in files)


@pytest.mark.parametrize("fixture", sorted(POINTS))
def test_each_fixture_reads_to_its_exact_figures(fixture):
    result = parsed(fixture)
    assert result.errors == []
    got = [(p["point_id"], p["concurrency"], p.get("request_rate"), p.get("median_ttft_ms"),
            p.get("median_tpot_ms"), p.get("output_throughput"), p["num_prompts"], p["completed"],
            p["failed"], sum(q["point_id"] == p["point_id"] for q in result.requests), p["tool_version"])
           for p in result.points]
    assert got == POINTS[fixture]
    for point in result.points:
        assert point["tool"] == "guidellm" and point["repeat"] == 1 and point["workload"] == "benchmarks"
        assert point["model_id"] == "example/tiny-chat"
        assert point["backend"] in ("openai_http", "openai_server")
        json.loads(point["metadata_json"])


def test_the_0_1_report_has_no_summary_and_its_requests_hold_the_figures():
    result = parsed("guidellm_v01_report.json")
    sync, rate = result.points
    assert sync["summary_paths"] is None and sync.get("median_ttft_ms") is None
    assert sync["max_concurrency"] == 1
    assert json.loads(rate["summary_paths"]) == {"request_rate": "benchmarks[0].benchmarks[1].rate"}
    doc = json.loads((HERE / "guidellm_v01_report.json").read_text())
    first = doc["benchmarks"][0]["benchmarks"][0]["results"][0]
    row = result.requests[0]
    assert row == {
        "point_id": "benchmarks__c01", "request_idx": 0, "source_line": 1, "error": None,
        "record_path": "benchmarks[0].benchmarks[0].results[0]",
        "input_tokens": 8, "output_tokens": 4, "ttft_s": 0.05, "start_time_s": 1725000000.0,
        "latency_s": first["end_time"] - first["start_time"],
        "itl_count": 3, "itl_sum_s": sum(first["decode_times"]["data"]),
        "field_paths": common.paths_json({
            "input_tokens": "prompt_token_count", "output_tokens": "output_token_count",
            "ttft_s": "first_token_time", "start_time_s": "start_time", "latency_s": "end_time - start_time",
            "itl_count": "decode_times.data", "itl_sum_s": "decode_times.data"}),
    }
    error = [q for q in result.requests if q["error"]]
    assert [(q["point_id"], q["request_idx"], q["record_path"], q["error"]) for q in error] == [
        ("benchmarks__i2", 2, "benchmarks[0].benchmarks[1].errors[0]",
         "ClientConnectorError: Cannot connect to host localhost:8000")]
    assert [q["request_idx"] for q in result.requests if q["point_id"] == "benchmarks__i2"] == [0, 1, 2]


def test_request_rows_carry_the_tools_figures_in_the_columns_units_with_their_paths():
    result = parsed("guidellm_v02-v03_concurrent.json")
    doc = json.loads((HERE / "guidellm_v02-v03_concurrent.json").read_text())
    first = doc["benchmarks"][0]["requests"]["successful"][0]
    ok, *_, failed = result.requests
    assert ok["ttft_s"] == common.seconds(first["time_to_first_token_ms"], "ms") == pytest.approx(0.021)
    assert ok["latency_s"] == first["request_latency"] == 0.064
    assert ok["tpot_ms"] == first["inter_token_latency_ms"] == 6.143
    assert ok["start_time_s"] == first["start_time"]
    assert json.loads(ok["field_paths"]) == {
        "input_tokens": "prompt_tokens", "output_tokens": "output_tokens", "ttft_s": "time_to_first_token_ms",
        "latency_s": "request_latency", "start_time_s": "start_time", "tpot_ms": "inter_token_latency_ms"}
    assert failed["record_path"] == "benchmarks[0].requests.errored[0]"
    assert failed["error"] == "ClientResponseError: 500, message='Internal Server Error'"
    assert "ttft_s" not in failed and "tpot_ms" not in failed
    assert json.loads(failed["field_paths"])["error"] == "error"
    point = result.points[0]
    latency = doc["benchmarks"][0]["metrics"]["request_latency"]["successful"]
    assert point["median_e2el_ms"] == common.millis(latency["median"], "s") == pytest.approx(64.0)
    assert point["mean_e2el_ms"] == pytest.approx(65.67)
    assert point["total_input_tokens"] == 96 and point["total_output_tokens"] == 24
    assert point["duration_s"] == 0.264
    paths = json.loads(point["summary_paths"])
    assert paths["median_ttft_ms"] == "benchmarks[0].metrics.time_to_first_token_ms.successful.median"
    assert paths["median_tpot_ms"] == "benchmarks[0].metrics.inter_token_latency_ms.successful.median"
    assert paths["p90_tpot_ms"] == "benchmarks[0].metrics.inter_token_latency_ms.successful.percentiles.p90"
    assert paths["output_throughput"] == "benchmarks[0].metrics.output_tokens_per_second.successful.mean"
    assert paths["num_prompts"] == "benchmarks[0].request_totals.total"
    assert paths["failed"] == "benchmarks[0].request_totals.errored"
    assert paths["max_concurrency"] == "benchmarks[0].args.strategy.streams"
    meta = json.loads(point["metadata_json"])
    assert meta["tool_time_per_output_token_ms"] == {"mean": 5.375, "median": 5.375}
    assert meta["strategy"] == {"type_": "concurrent", "streams": 2}


def test_0_4_on_records_take_their_error_and_status_from_info():
    v04 = parsed("guidellm_v04_benchmarks.json")
    assert [(q["record_path"], q["error"]) for q in v04.requests] == [
        ("benchmarks[0].requests.successful[0]", None),
        ("benchmarks[0].requests.errored[0]", "HTTPStatusError: 503 Service Unavailable")]
    assert json.loads(v04.requests[1]["field_paths"])["error"] == "info.error"
    assert json.loads(v04.points[0]["summary_paths"])["completed"] == "benchmarks[0].metrics.request_totals.successful"
    v07 = parsed("guidellm_v07_benchmarks.json")
    cut = v07.requests[1]
    assert (cut["record_path"], cut["error"], cut["input_tokens"]) == (
        "benchmarks[0].requests.incomplete[0]", "Request was cancelled", 48)
    assert "latency_s" not in cut and "output_tokens" not in cut
    meta = json.loads(v07.points[0]["metadata_json"])
    assert meta["incomplete_requests"] == 1 and meta["report_schema"] == 2
    assert v07.points[0].get("max_concurrency") is None


def test_requests_outside_the_measured_window_are_left_out_as_the_tool_leaves_them_out():
    result = parsed("guidellm_v05-v06_benchmarks.json")
    assert [q["record_path"] for q in result.requests] == ["benchmarks[0].requests.successful[1]"]
    assert result.requests[0]["request_idx"] == 0
    meta = json.loads(result.points[0]["metadata_json"])
    assert meta["requests_outside_window"] == 1
    assert meta["warmup_duration"] == 0.6


def test_a_sampled_report_keeps_its_summary_and_leaves_its_requests_out_with_an_error():
    doc = json.loads((HERE / "guidellm_v02-v03_concurrent.json").read_text())
    doc["benchmarks"][0]["requests"]["successful"].pop()
    doc["benchmarks"][0]["request_samples"] = {"successful": 2, "errored": 1, "incomplete": 0, "total": None}
    result = parsed("x.json", data=json.dumps(doc).encode())
    assert len(result.points) == 1 and result.points[0]["median_ttft_ms"] == 22.0
    assert result.requests == []
    assert [e.reason for e in result.errors] == [
        "benchmarks__c02: the report keeps 2 of 3 successful requests (sampled, or with requests its "
        "summary leaves out); its requests are left out and the point keeps the tool's summary"]


def test_yaml_lines_point_at_the_benchmark_and_each_record():
    text = (HERE / "guidellm_v02-v03_rate.yaml").read_text()
    lines = text.split("\n")
    result = parsed("guidellm_v02-v03_rate.yaml")
    assert result.points[0]["source_line"] == 2 and lines[1].startswith("- args:")
    assert [q["record_path"].rsplit(".", 1)[1] for q in result.requests] == [
        "incomplete[0]", "successful[0]", "successful[1]", "successful[2]"]     # keys sorted by yaml.dump
    for row in result.requests:
        assert lines[row["source_line"] - 1].lstrip().startswith("- ")
    assert result.requests[0]["error"] == "asyncio.CancelledError: benchmark max_duration reached"


def test_a_yaml_dump_of_each_json_report_reads_as_the_json_does():
    """yaml.dump (keys sorted, as the tool saves YAML) puts 0.5's guidellm_version at the end and
    0.1's marks deep in the file: recognised all the same, read to the same points."""
    for fixture in ("guidellm_v01_report.json", "guidellm_v05-v06_benchmarks.json", "guidellm_v07_benchmarks.json"):
        doc = json.loads((HERE / fixture).read_text())
        data = yaml.dump(doc).encode()
        assert guidellm.recognise("result.yaml", data), fixture
        from_yaml, from_json = parsed("x.yaml", data=data), parsed(fixture)
        strip = ("source_line", "summary_paths")
        assert [{k: v for k, v in p.items() if k not in strip} for p in from_yaml.points] == \
               [{k: v for k, v in p.items() if k not in strip} for p in from_json.points]
        assert len(from_yaml.requests) == len(from_json.requests) and from_yaml.errors == []


def _resolve(doc: Any, where: str) -> Any:
    for name, index, quoted in re.findall(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]', where):
        doc = doc[int(index)] if index else doc[name or json.loads(f'"{quoted}"')]
    return doc


def _expected(column: str, raw: Any, where: str) -> float:
    if column.endswith("_ms") and ("request_latency" in where or "Request latency" in where
                                   or "Request Latency" in where):
        return common.millis(raw, "s")
    return raw


@pytest.mark.parametrize("fixture", [f for f in sorted(POINTS) if not f.endswith(".csv")])
def test_every_summary_path_and_field_path_leads_to_the_value_read(fixture):
    text = (HERE / fixture).read_text()
    doc = yaml.safe_load(text) if fixture.endswith(".yaml") else json.loads(text)
    result = parsed(fixture)
    for point in result.points:
        for column, where in json.loads(point["summary_paths"] or "{}").items():
            assert point[column] == pytest.approx(_expected(column, _resolve(doc, where), where)), (column, where)
    for row in result.requests:
        record = _resolve(doc, row["record_path"])
        for column, where in json.loads(row["field_paths"] or "{}").items():
            if " - " in where:                  # 0.1's latency: end_time - start_time
                a, b = where.split(" - ")
                assert row[column] == _resolve(record, a) - _resolve(record, b)
            elif column == "itl_count":
                assert row[column] == len(_resolve(record, where))
            elif column == "itl_sum_s":
                assert row[column] == sum(_resolve(record, where))
            elif column == "ttft_s" and where.endswith("_ms"):
                assert row[column] == common.seconds(_resolve(record, where), "ms")
            else:
                assert row[column] == _resolve(record, where), (column, where)


@pytest.mark.parametrize("fixture", [f for f in sorted(POINTS) if f.endswith(".csv")])
def test_every_csv_cell_named_holds_the_value_read(fixture):
    lines = (HERE / fixture).read_text().split("\n")
    for point in parsed(fixture).points:
        for column, where in json.loads(point["summary_paths"]).items():
            m = re.match(r"line (\d+), column (\d+): .*?(?: \((p90|p99)\))?(?:, at (\S+))?$", where)
            assert m, where
            cell = next(csv.reader(io.StringIO(lines[int(m[1]) - 1])))[int(m[2]) - 1]
            if m[4]:                                     # a setting inside a cell of JSON
                raw = _resolve(json.loads(cell), m[4])
            elif m[3]:
                raw = float(cell.strip("[]").split(",")[{"p90": 7, "p99": 9}[m[3]]])
            else:
                raw = float(cell)
            assert point[column] == pytest.approx(_expected(column, raw, where)), (column, where)


def test_the_csv_beside_its_json_gives_nothing_and_alone_gives_its_points():
    beside = frozenset({"bench/benchmarks.json", "bench/benchmarks.html"})
    assert parsed("guidellm_v07_export.csv", "bench/benchmarks.csv", beside) == common.BenchParse()
    assert parsed("guidellm_v07_export.csv", "bench/benchmarks.csv", frozenset({"bench/other.json"})).points
    assert parsed("guidellm_v02-v03_export.csv", "bench/run.csv", frozenset({"bench/run.yaml"})).points == []


def test_several_benchmarks_in_one_report_are_several_points():
    one = json.loads((HERE / "guidellm_v02-v03_concurrent.json").read_text())
    rate = yaml.safe_load((HERE / "guidellm_v02-v03_rate.yaml").read_text())
    sweep = {"benchmarks": one["benchmarks"] + rate["benchmarks"]}
    data = json.dumps(sweep).encode()
    result = guidellm.parse("bench/sweep.json", data, frozenset())
    assert [(p["point_id"], p["concurrency"], p.get("request_rate")) for p in result.points] == [
        ("sweep__c02", 2, None), ("sweep__i2", None, 1.5)]
    assert {q["point_id"] for q in result.requests} == {"sweep__c02", "sweep__i2"}
    named = guidellm.parse("bench/chat__c08.json", data, frozenset())
    assert [(p["point_id"], p["workload"], p["concurrency"]) for p in named.points] == [
        ("chat__c08", "chat", 8), ("chat__c08#2", "chat", None)]


@pytest.mark.parametrize("fixture", sorted(POINTS))
def test_recognised_by_content_under_another_name(fixture):
    data = (HERE / fixture).read_bytes()
    assert guidellm.recognise("result.json", data)
    assert tools.recognised("result.json", data) is guidellm


def test_the_real_files_of_the_0_3_test_asset_are_recognised_whatever_their_first_key():
    pretty = json.dumps(json.loads((HERE / "guidellm_v04_benchmarks.json").read_text()), indent=2).encode()
    assert guidellm.recognise("x", pretty) and parsed("x.json", data=pretty).points


def test_other_tools_files_and_vllms_are_not_recognised():
    others = [p for p in FIXTURES.rglob("*") if p.is_file() and HERE not in p.parents]
    others += sorted(SHAPES.glob("*.json"))
    assert len(others) > 20
    for path in others:
        assert not guidellm.recognise("result.json", path.read_bytes()), path
    for data in (b"", b"{}", b'{"benchmarks": []}', b'{"benchmarks": [{"name": "x"}]}', b"benchmarks:\n- x\n",
                 b"Type,Run Id\n1,2\n", b"\x00\x01binary"):
        assert not guidellm.recognise("result.json", data), data


@pytest.mark.parametrize("fixture", sorted(POINTS))
def test_a_truncated_report_gives_errors_not_an_exception(fixture):
    data = (HERE / fixture).read_bytes()
    # a YAML cut in its last lines (the worker's settings, sorted last) still parses whole: not cut there
    cuts = (len(data) // 3, len(data) // 2) + (() if fixture.endswith(".yaml") else (len(data) - 7,))
    for cut in cuts:
        result = parsed(fixture, data=data[:cut])
        assert result.errors, (fixture, cut)
        assert len(result.points) < len(POINTS[fixture]) or fixture.endswith(".yaml"), (fixture, cut)


@pytest.mark.parametrize("data", [
    b"{not json", b'{"benchmarks": 3}', b'{"benchmarks": []}', b'{"benchmarks": [3, "x"]}',
    b'{"metadata": {"guidellm_version": "0.5.0"}, "benchmarks": [{"config": 1, "metrics": []}]}',
    b"benchmarks:\n- args: [\n", b"benchmarks:\n\t- bad tab\n", b"[1, 2]",
    b'{"benchmarks": [{"benchmarks": [{"mode": "synchronous", "results": [1, {"start_time": "x"}]}]}]}',
    b"Run Info,Run Info\nRun ID,Run Index\n", b'Run Info,Run Info\nRun ID,Run Index\n,\nx,1,2\n',
])
def test_a_malformed_report_gives_errors_not_an_exception(data):
    result = guidellm.parse("bench/benchmarks.json", data, frozenset())
    assert result.errors and not result.requests


def test_a_nan_figure_leaves_its_point_out_with_an_error():
    doc = json.loads((HERE / "guidellm_v02-v03_concurrent.json").read_text())
    doc["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["median"] = math.nan
    data = json.dumps(doc).encode()
    assert b"NaN" in data
    result = parsed("x.json", data=data)
    assert result.points == [] and result.requests == []
    assert [(e.line, e.reason) for e in result.errors] == [(1, (
        "benchmarks__c02: median_ttft_ms (benchmarks[0].metrics.time_to_first_token_ms.successful.median) "
        "is NaN where a number belongs; the point is left out"))]


def test_a_nan_in_a_request_leaves_the_requests_out_and_keeps_the_point():
    doc = json.loads((HERE / "guidellm_v07_benchmarks.json").read_text())
    doc["benchmarks"][0]["requests"]["successful"][0]["request_latency"] = math.inf
    result = parsed("x.json", data=json.dumps(doc).encode())
    assert len(result.points) == 1 and result.requests == []
    assert [e.reason for e in result.errors] == [
        "benchmarks__i1: benchmarks[0].requests.successful[0].request_latency is infinite where a number "
        "belongs; its requests are left out"]


def test_a_nan_in_a_csv_cell_leaves_its_point_out():
    text = (HERE / "guidellm_v05-v06_export.csv").read_text()
    rows = list(csv.reader(io.StringIO(text)))
    column = next(j for j in range(len(rows[0])) if (rows[0][j], rows[1][j], rows[2][j]) ==
                  ("Time to First Token", "Successful ms", "Median"))
    rows[3][column] = "nan"
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    result = parsed("x.csv", data=buf.getvalue().encode())
    assert result.points == []
    assert result.errors[0].line == 4 and "median_ttft_ms" in result.errors[0].reason
    assert "is NaN where a number belongs; the point is left out" in result.errors[0].reason


def test_report_schema_2_of_0_8_at_a_constant_rate_has_its_time_to_first_token_through_derive(tmp_path):
    """0.8's schema 2 (metadata.version 2, every metric a {successful, errored, incomplete, total}
    distribution with mean_ci and percentile_cis, the dispatch and round-trip distributions, a
    benchmark's warnings) at a constant rate: a point by its position with its rate, its time to
    first token the tool's successful requests' (recomputed here from the records) through ingest
    and derive."""
    import duckdb
    from helpers.derive_rows import ingest_and_derive
    raw = json.loads((HERE / "guidellm_v08_constant.json").read_text())
    bench = raw["benchmarks"][0]
    assert raw["metadata"]["version"] == 2 and bench["config"]["strategy"]["type_"] == "constant"
    assert set(bench["metrics"]["time_to_first_token_ms"]) == {"successful", "errored", "incomplete", "total"}
    ttfts = [r["time_to_first_token_ms"] for r in bench["requests"]["successful"]]
    run = tmp_path / "data" / "runs" / "tiny-chat__gl08__4k__vllm__0415-162001"
    (run / "bench").mkdir(parents=True)
    (run / "launch.out").write_text("status=ready\n")
    (run / "bench" / "benchmarks.json").write_bytes((HERE / "guidellm_v08_constant.json").read_bytes())
    rules = {"prefix_cache_tok_s": 60000, "gate_min_score": 1.0, "cached_share_max_pct": 20,
             "default_max_num_seqs": 256, "burst_tpot_ms": 0.5, "cached_mark_pct": 10}
    con = duckdb.connect(str(ingest_and_derive(tmp_path, rules)), read_only=True)
    row = con.execute("select concurrency, sent, completed, ttft_median_s, figures_from, tool_version "
                      "from bench_points").fetchone()
    rate = con.execute("select request_rate from stg_bench_points").fetchone()[0]
    con.close()
    assert row[:3] == (None, 2, 1) and rate == 2.0
    assert row[3] == pytest.approx(statistics.median(ttfts) / 1000, rel=1e-12) == 0.05
    assert row[4] == "requests" and row[5] == "0.8.1"

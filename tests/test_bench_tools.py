"""Result files of other benchmark tools in a run folder: recognised by content whatever their
names (stages/ingest/parsers/tools/), and anything ingest does not recognise listed once in
ingest_errors, never skipped in silence, while the rest of the run ingests.
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from stages.ingest.parsers import bench_json
from stages.ingest.parsers import tools
from stages.ingest.read import content_kind
from stages.ingest.stage import run as ingest_run

FIXTURES = Path(__file__).parent / "fixtures"
NODE_RUNS = FIXTURES / "node_campaign" / "runs"
SHAPES = FIXTURES / "bench_shapes"
GLM = "glm53__tp8_dcp8__1024k__vllm__1116-062500"


def ingest(root: Path, folder: Path, extra: dict[str, bytes]) -> duckdb.DuckDBPyConnection:
    runs = root / "data" / "runs"
    dest = runs / folder.name
    shutil.copytree(folder, dest, ignore=shutil.ignore_patterns("MANIFEST.sha256"))
    for name, data in extra.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(data)
    ingest_run(runs_dir=runs, warehouse=root / "data" / "warehouse.duckdb", root=root)
    return duckdb.connect(str(root / "data" / "warehouse.duckdb"), read_only=True)


def test_an_unknown_file_is_one_error_row_and_the_rest_of_the_run_ingests(tmp_path):
    baseline = ingest(tmp_path / "a", NODE_RUNS / GLM, {})
    points = baseline.execute("select count(*) from raw_bench_points").fetchone()[0]
    assert points > 5 and baseline.execute("select count(*) from ingest_errors").fetchone()[0] == 0
    con = ingest(tmp_path / "b", NODE_RUNS / GLM, {
        "bench/notes.txt": b"ran at 3am, node was busy\n",
        "bench/summary.json": json.dumps({"model": "x", "answer": 42}).encode(),
        "bench/plot.png": b"\x89PNG\r\n\x1a\n\x00\x00",
        "extra.log.gz": gzip.compress(b"some text\n"),
        "gpu/notes.md": b"# notes\n",
    })
    errors = dict(con.execute("select source_file, reason from ingest_errors").fetchall())
    base = f"data/runs/{GLM}/"
    assert errors == {
        base + "bench/notes.txt": "unrecognised: text, not a result file of a benchmark tool ingest reads; not read",
        base + "bench/summary.json": "unrecognised: a JSON object, not a result file of a benchmark tool "
                                     "ingest reads; not read",
        base + "bench/plot.png": "unrecognised: binary data, not a result file of a benchmark tool ingest "
                                 "reads; not read",
        base + "extra.log.gz": "unrecognised: text, not a file of a run folder ingest reads; not read",
        base + "gpu/notes.md": "unrecognised: text, not a file of a run folder ingest reads; not read",
    }
    assert con.execute("select count(*) from raw_bench_points").fetchone()[0] == points


@pytest.mark.parametrize("data, kind", [
    (b"", "an empty file"), (b"\x1f\x8b\x08\x00", "gzip data"), (b"  {\"a\": 1}", "a JSON object"),
    (b"[1, 2]", "a JSON array"), (b"hello\n", "text"), (b"\x00\x01\x02", "binary data"),
    ("é".encode() * 3000, "text"),
])
def test_the_kind_of_a_file_is_named_by_its_first_bytes(data, kind):
    assert content_kind(data) == kind


def test_every_vllm_result_shape_is_vllm_s_and_no_other_tool_s():
    files = sorted(SHAPES.glob("*.json"))
    assert len(files) >= 8
    for path in files:
        data = path.read_bytes()
        assert bench_json.recognise(data), path.name
        assert tools.recognised(path.name, data) is None, path.name


def test_a_damaged_vllm_result_is_still_vllm_s_so_that_its_error_is_said():
    data = (SHAPES / sorted(p.name for p in SHAPES.glob("*.json"))[0]).read_bytes()
    assert bench_json.recognise(data[: len(data) // 2])
    assert not bench_json.recognise(b'{"model": "x"}') and not bench_json.recognise(b"not json")


def test_per_request_records_meet_the_point_of_the_summary_beside_them(tmp_path):
    """AIPerf's profile_export.jsonl states no concurrency; in a folder whose name states none
    either, its requests take the point of profile_export_aiperf.json beside them."""
    source = FIXTURES / "bench_tools" / "aiperf" / "aiperf_0.10.x_schema1.3"
    files = {f"bench/c2/{p.name}": p.read_bytes() for p in sorted(next(source.iterdir()).iterdir())}
    con = ingest(tmp_path, NODE_RUNS / "dsv4_pro__dep8__781k__vllm__1116-110000", files)
    points = con.execute("select point_id, concurrency, tool from raw_bench_points").fetchall()
    assert points == [("profile_export_aiperf__c02", 2, "aiperf")]
    requests = con.execute("select distinct point_id from raw_bench_requests").fetchall()
    assert requests == [("profile_export_aiperf__c02",)]
    assert con.execute("select count(*) from ingest_errors").fetchone()[0] == 0

"""Node probes: given raw node rows, derive builds the node tables; ingest_nodes loads real folders."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from helpers.derive_node_rows import N8, N8_OLD, RAW_DDL, RULES, _src, derive_into, query, raw_rows
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.ingest import nodes as ingest_nodes

PROJECT = Path(__file__).resolve().parent.parent
REAL_NODE = PROJECT / "data" / "nodes" / "h200x2__1130-054711"
NODE_FIXTURES = Path(__file__).parent / "fixtures" / "node"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return derive_into(tmp_path_factory.mktemp("nodes"), raw_rows())


# ---------------------------------------------------------------- given raw rows, expect

def test_nodes_two_quads_are_two_islands_and_latest_probe_marked(built):
    rows = {r["node_id"]: r for r in query(built, "select * from nodes")}
    n8 = rows[N8]
    assert (n8["gpu_count"], n8["gpu_name"], n8["nvlink_islands"], n8["nvlink_island_labels"]) == \
        (8, "NVIDIA H200 NVL", 2, "0-3 4-7")
    assert (n8["nccl_version"], n8["nccl_nvls_enable"], n8["is_latest"]) == ("2.28.9", "0", True)
    assert n8["git_sha"] is None                      # the word HEAD is not a commit
    old = rows[N8_OLD]
    assert old["is_latest"] is False and old["git_sha"].startswith("0123456789")
    assert old["gpu_count"] == 8 and old["nvlink_islands"] is None   # from meta.json; no topo.txt


def test_gpus_carry_affinity_island_and_nvlinks(built):
    gpus = {r["gpu_index"]: r for r in query(built, f"select * from node_gpus where node_id = '{N8}'")}
    assert gpus[5]["nvlink_island"] == "4-7" and gpus[5]["cpu_affinity"] == "64-127"
    assert gpus[5]["numa_affinity"] == "1" and gpus[2]["nvlink_island"] == "0-3"
    assert gpus[0]["active_nvlinks"] == 18 and gpus[0]["nvlink_link_gbs"] == 26.562
    assert gpus[7]["source_file"] == _src(N8, "gpus.csv") and gpus[7]["source_line"] == 9


def test_topology_same_island_and_p2p_links(built):
    topo = {(r["device"], r["peer"]): r for r in query(built, f"select * from node_topology where node_id = '{N8}'")}
    assert len(topo) == 64
    assert topo[("GPU1", "GPU3")]["same_island"] is True and topo[("GPU1", "GPU3")]["nvlinks"] == 18
    assert topo[("GPU3", "GPU4")]["same_island"] is False and topo[("GPU3", "GPU4")]["link"] == "SYS"
    p2p = {(r["src_gpu"], r["dst_gpu"]): r for r in query(built, "select * from node_p2p")}
    assert (p2p[(0, 1)]["link"], p2p[(0, 1)]["same_island"]) == ("NV18", True)
    assert (p2p[(0, 4)]["link"], p2p[(0, 4)]["link_kind"], p2p[(0, 4)]["same_island"]) == ("SYS", "pcie", False)


def test_allreduce_bus_factor_and_groups_that_span_islands(built):
    sweep = {(r["gpu_group"], r["message_bytes"]): r for r in query(built, "select * from node_allreduce")}
    quad = sweep[("0-3", 2**30)]
    assert quad["bus_factor"] == pytest.approx(1.5) and quad["spans_islands"] is False
    assert quad["busbw_gbs"] == pytest.approx(quad["algbw_gbs"] * 1.5, rel=1e-4)
    whole = sweep[("0-7", 4 * 2**30)]
    assert whole["bus_factor"] == pytest.approx(1.75) and whole["spans_islands"] is True
    assert whole["gpus"] == "0,1,2,3,4,5,6,7" and whole["ranks"] == 8


def test_peak_per_group_with_its_size_and_line(built):
    peaks = {r["gpu_group"]: r for r in query(built, "select * from node_allreduce_peak")}
    assert set(peaks) == {"0-3", "4-7", "0-7"}
    quad = peaks["0-3"]
    assert quad["message_bytes"] == 4 * 2**30 and quad["sizes_measured"] == 2 and quad["all_correct"]
    assert quad["busbw_gbs"] == pytest.approx(4 * 2**30 / 18e6 * 1.5, rel=1e-4)
    assert (quad["source_file"], quad["source_line"]) == (_src(N8, "allreduce.jsonl"), 2)
    whole = peaks["0-7"]   # the best of its sweep was the smaller message
    assert whole["spans_islands"] is True and whole["message_bytes"] == 2**30 and whole["source_line"] == 5


def test_node_tables_exported_and_in_metrics(built):
    for table in ("nodes", "node_gpus", "node_topology", "node_p2p", "node_allreduce", "node_allreduce_peak"):
        assert (built / "derived" / f"{table}.csv").is_file()
    metrics = json.loads((built / "metrics.json").read_text())
    assert metrics["nodes"] == 2
    assert metrics["node_busbw_peak_gbs"] == pytest.approx(4 * 2**30 / 18e6 * 1.5, abs=1e-3)


# ---------------------------------------------------------------- invariants

def test_busbw_that_is_not_algbw_times_the_bus_factor_fails(tmp_path):
    rows = raw_rows()
    rows["raw_node_allreduce"][0]["busbw_gbs"] = rows["raw_node_allreduce"][0]["algbw_gbs"]  # factor 1, not 1.5
    with pytest.raises(derive.DataTestError, match=r"node_allreduce\.busbw_is_algbw_times_bus_factor"):
        derive_into(tmp_path, rows)


def test_a_wrong_sum_fails(tmp_path):
    rows = raw_rows()
    rows["raw_node_allreduce"][3]["correct"] = False
    with pytest.raises(derive.DataTestError, match=r"node_allreduce\.correct_is_true"):
        derive_into(tmp_path, rows)


def test_an_asymmetric_topology_fails(tmp_path):
    rows = raw_rows()
    cell = next(r for r in rows["raw_node_links"] if (r["device"], r["peer"]) == ("GPU0", "GPU5"))
    cell.update(link="NODE")
    with pytest.raises(derive.DataTestError, match=r"node_topology\.topology_symmetric"):
        derive_into(tmp_path, rows)


def test_a_duplicate_measurement_fails(tmp_path):
    rows = raw_rows()
    rows["raw_node_allreduce"].append(dict(rows["raw_node_allreduce"][0]))
    with pytest.raises(derive.DataTestError, match=r"node_allreduce\.unique\(node_id, gpu_group, message_bytes\)"):
        derive_into(tmp_path, rows)


# ---------------------------------------------------------------- the real probe, end to end

def _project_copy(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(REAL_NODE, root / "data" / "nodes" / REAL_NODE.name)
    return root


def test_real_h200x2_probe_ingested_and_derived(tmp_path):
    root = _project_copy(tmp_path)
    summary = ingest_nodes.run(nodes_dir=root / "data" / "nodes", warehouse=root / "data" / "warehouse.duckdb",
                               root=root)
    assert summary["nodes"] == 1 and summary["errors"] == 0
    assert summary["rows"]["raw_node_allreduce"] == 13 and summary["rows"]["raw_node_nvlinks"] == 36
    out = root / "data"
    derive.run(warehouse=out / "warehouse.duckdb", campaign_db=out / "campaign.duckdb",
               derived_dir=out / "derived", metrics_file=out / "metrics.json", rules=RULES, workloads={})
    peak = query(out, "select * from node_allreduce_peak")
    assert len(peak) == 1
    assert (peak[0]["gpu_group"], peak[0]["ranks"], peak[0]["spans_islands"]) == ("0-1", 2, False)
    assert peak[0]["busbw_gbs"] == pytest.approx(347.635) and peak[0]["message_bytes"] == 4 * 2**30
    assert peak[0]["source_file"] == f"data/nodes/{REAL_NODE.name}/allreduce.jsonl" and peak[0]["source_line"] == 13
    p2p = query(out, "select * from node_p2p order by src_gpu")
    assert [(r["src_gpu"], r["dst_gpu"], r["link"], r["copy_gbs"]) for r in p2p] == \
        [(0, 1, "NV18", 382.911), (1, 0, "NV18", 381.378)]
    node = query(out, "select * from nodes")[0]
    assert (node["gpu_count"], node["nvlink_islands"], node["nccl_nvls_enable"]) == (2, 1, "0")


def test_unreadable_lines_become_errors_replaced_on_reload(tmp_path):
    root = _project_copy(tmp_path)
    nodes = root / "data" / "nodes"
    broken = nodes / "cpu__1130-070000"
    broken.mkdir()
    (broken / "allreduce.jsonl").write_text(
        (REAL_NODE / "allreduce.jsonl").read_text().splitlines()[0] + "\n{not json\n")
    (broken / "meta.json").write_text('{"schema_version": 99}')
    warehouse = root / "data" / "warehouse.duckdb"
    con = duckdb.connect(str(warehouse))
    con.execute(RAW_DDL.read_text())
    con.execute("insert into ingest_errors values ('some_run', 'data/runs/some_run/x.log', 1, 'run error')")
    con.close()
    for _ in range(2):   # a full reload each time: no duplicates
        summary = ingest_nodes.run(nodes_dir=nodes, warehouse=warehouse, root=root)
        assert summary["nodes"] == 2 and summary["errors"] == 2
    con = duckdb.connect(str(warehouse), read_only=True)
    errors = con.execute("select run_id, source_file, source_line, reason from ingest_errors "
                         "order by source_file").fetchall()
    kinds = dict(con.execute("select node_id, node_kind from raw_nodes").fetchall())
    allreduce = con.execute("select node_id, count(*) from raw_node_allreduce group by all order by 1").fetchall()
    con.close()
    assert errors[0][:3] == (None, "data/nodes/cpu__1130-070000/allreduce.jsonl", 2)
    assert "not valid JSON" in errors[0][3]
    assert errors[1][:3] == (None, "data/nodes/cpu__1130-070000/meta.json", 1)
    assert errors[2] == ("some_run", "data/runs/some_run/x.log", 1, "run error")   # run errors kept
    assert kinds == {"cpu__1130-070000": "cpu", REAL_NODE.name: "h200x2"}
    assert allreduce == [("cpu__1130-070000", 1), (REAL_NODE.name, 13)]
    shutil.rmtree(broken)   # a folder gone from disk leaves the tables with it
    summary = ingest_nodes.run(nodes_dir=nodes, warehouse=warehouse, root=root)
    assert summary["nodes"] == 1 and summary["errors"] == 0
    con = duckdb.connect(str(warehouse), read_only=True)
    assert con.execute("select count(*) from ingest_errors where run_id is null").fetchone()[0] == 0
    assert con.execute("select count(*) from raw_nodes").fetchone()[0] == 1
    con.close()


def test_run_ingest_and_node_ingest_do_not_rebuild_each_other(tmp_path):
    root = _project_copy(tmp_path)
    runs = root / "data" / "runs"
    runs.mkdir()
    warehouse = root / "data" / "warehouse.duckdb"
    first = ingest.run(runs_dir=runs, warehouse=warehouse, root=root)
    ingest_nodes.run(nodes_dir=root / "data" / "nodes", warehouse=warehouse, root=root)
    again = ingest.run(runs_dir=runs, warehouse=warehouse, root=root)
    assert first["rebuilt"] is False and again["rebuilt"] is False
    summary = ingest_nodes.run(nodes_dir=root / "data" / "nodes", warehouse=warehouse, root=root)
    assert summary["remade"] == [] and summary["rows"]["raw_nodes"] == 1
    con = duckdb.connect(str(warehouse), read_only=True)
    assert con.execute("select count(*) from raw_node_allreduce").fetchone()[0] == 13
    con.close()


def test_a_node_table_that_differs_from_raw_sql_is_made_again(tmp_path):
    root = _project_copy(tmp_path)
    warehouse = root / "data" / "warehouse.duckdb"
    con = duckdb.connect(str(warehouse))
    con.execute("create table raw_node_p2p (node_id varchar, src integer)")
    con.close()
    summary = ingest_nodes.run(nodes_dir=root / "data" / "nodes", warehouse=warehouse, root=root)
    assert summary["remade"] == ["raw_node_p2p"] and summary["rows"]["raw_node_p2p"] == 2


def test_no_nodes_folder_gives_empty_tables(tmp_path):
    summary = ingest_nodes.run(nodes_dir=tmp_path / "none", warehouse=tmp_path / "w.duckdb", root=tmp_path)
    assert summary["nodes"] == 0 and all(v == 0 for v in summary["rows"].values())

"""Node probes: given raw node rows, derive builds the node tables; ingest_nodes loads real folders."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from db_rows import db_rows
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.ingest import nodes as ingest_nodes
from stages.core import raw_schema

PROJECT = Path(__file__).resolve().parent.parent
RAW_DDL = raw_schema.RAW_SCHEMA
REAL_NODE = PROJECT / "data" / "nodes" / "h200x2__1130-054711"
NODE_FIXTURES = Path(__file__).parent / "fixtures" / "node"
RULES = {"prefix_cache_tok_s": 60000, "gate_min_score": 1.0, "cached_share_max_pct": 20,
         "default_max_num_seqs": 1024, "burst_tpot_ms": 0.5, "cached_mark_pct": 10}

N8 = "h200x8__1201-090000"
N8_OLD = "h200x8__1130-090000"


def _src(node: str, name: str) -> str:
    return f"data/nodes/{node}/{name}"


def _links8(node: str) -> list[dict]:
    """The matrix of two quads: NV18 inside 0-3 and 4-7, SYS between them."""
    rows = []
    for a in range(8):
        for b in range(8):
            link = "X" if a == b else "NV18" if a // 4 == b // 4 else "SYS"
            kind = {"X": "self", "NV18": "nvlink", "SYS": "pcie"}[link]
            rows.append({"node_id": node, "device": f"GPU{a}", "peer": f"GPU{b}", "link": link,
                         "link_kind": kind, "nvlinks": 18 if link == "NV18" else None,
                         "source_file": _src(node, "topo.txt"), "source_line": a + 2})
    return rows


def _sweep(node: str, group: str, gpus: list[int], points: list[tuple[int, float]], first_line: int) -> list[dict]:
    """allreduce rows: (bytes, time_us) -> algbw and busbw as nccl-tests defines them."""
    n = len(gpus)
    rows = []
    for i, (nbytes, time_us) in enumerate(points):
        algbw = nbytes / (time_us * 1000.0)
        rows.append({"node_id": node, "group_label": group, "gpus": ",".join(map(str, gpus)), "ranks": n,
                     "backend": "nccl", "device": "cuda", "dtype": "float32", "bytes": nbytes,
                     "count": nbytes // 4, "iters": 20, "warmup": 5, "time_us": time_us,
                     "time_us_min": time_us * 0.99, "time_us_max": time_us * 1.01,
                     "algbw_gbs": round(algbw, 4), "busbw_gbs": round(algbw * 2 * (n - 1) / n, 4),
                     "correct": True, "source_file": _src(node, "allreduce.jsonl"),
                     "source_line": first_line + i})
    return rows


def raw_rows() -> dict[str, list[dict]]:
    gib = 2**30
    return {
        "raw_nodes": [
            {"node_id": node, "folder": f"data/nodes/{node}", "node_kind": "h200x8", "status": "complete",
             "backend": "nccl", "device": "cuda", "device_count": 8, "git_sha": sha,
             "started_at": started, "finished_at": started, "schema_version": 1,
             "source_file": _src(node, "meta.json"), "source_line": 1}
            for node, sha, started in ((N8, "HEAD", "2026-12-01T09:00:00Z"),
                                       (N8_OLD, "0123456789abcdef0123456789abcdef01234567",
                                        "2026-11-30T09:00:00Z"))
        ],
        "raw_node_env": [{"node_id": N8, "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0",
                          "nccl": "2.28.9", "python": "3.12.3", "platform": "Linux", "gpu_count": 8,
                          "source_file": _src(N8, "env.json"), "source_line": 1}],
        "raw_node_env_vars": [{"node_id": N8, "name": "NCCL_NVLS_ENABLE", "value": "0", "forced": False,
                               "source_file": _src(N8, "env.json"), "source_line": 1}],
        "raw_node_gpus": [{"node_id": N8, "gpu_index": g, "name": "NVIDIA H200 NVL", "uuid": f"GPU-{g}",
                           "pci_bus_id": f"00000000:{g:02X}:00.0", "memory_total_mib": 143771.0,
                           "driver_version": "580.159.04", "power_limit_w": 600.0,
                           "clocks_max_sm_mhz": 1980.0, "source_file": _src(N8, "gpus.csv"),
                           "source_line": g + 2} for g in range(8)],
        "raw_node_affinity": [{"node_id": N8, "device": f"GPU{g}",
                               "cpu_affinity": "0-63" if g < 4 else "64-127",
                               "numa_affinity": "0" if g < 4 else "1", "gpu_numa_id": None,
                               "source_file": _src(N8, "topo.txt"), "source_line": g + 2} for g in range(8)],
        "raw_node_nvlinks": [{"node_id": N8, "gpu_index": g, "link": k, "link_gb_s": 26.562 if k < 18 else None,
                              "active": k < 18, "state": "26.562 GB/s" if k < 18 else "<inactive>",
                              "source_file": _src(N8, "nvlink.txt"), "source_line": 1 + g * 20 + k}
                             for g in range(8) for k in range(19)],
        "raw_node_links": _links8(N8),
        "raw_node_p2p": [
            {"node_id": N8, "src": 0, "dst": 1, "can_access_peer": True, "bytes": 256 * 2**20, "repeats": 5,
             "time_us_median": 700.0, "copy_gbs": 383.0, "copy_gbs_max": 384.0,
             "source_file": _src(N8, "p2p.jsonl"), "source_line": 1},
            {"node_id": N8, "src": 0, "dst": 4, "can_access_peer": True, "bytes": 256 * 2**20, "repeats": 5,
             "time_us_median": 5000.0, "copy_gbs": 53.7, "copy_gbs_max": 54.0,
             "source_file": _src(N8, "p2p.jsonl"), "source_line": 2},
        ],
        "raw_node_allreduce": (
            _sweep(N8, "0-3", [0, 1, 2, 3], [(gib, 5000.0), (4 * gib, 18000.0)], 1)
            + _sweep(N8, "4-7", [4, 5, 6, 7], [(gib, 5100.0), (4 * gib, 18000.0)], 3)
            + _sweep(N8, "0-7", list(range(8)), [(gib, 9000.0), (4 * gib, 40000.0)], 5)
        ),
    }


def make_warehouse(path: Path, rows: dict[str, list[dict]]) -> Path:
    con = duckdb.connect(str(path))
    con.execute(RAW_DDL.read_text())
    for table, table_rows in rows.items():
        for row in table_rows:
            cols = list(row)
            con.execute(f"insert into {table} ({', '.join(cols)}) values ({', '.join('$' + c for c in cols)})", row)
    con.close()
    return path


def derive_into(tmp_path: Path, rows: dict[str, list[dict]]) -> Path:
    warehouse = make_warehouse(tmp_path / "warehouse.duckdb", rows)
    out = tmp_path / "out"
    derive.run(warehouse=warehouse, campaign_db=out / "campaign.duckdb", derived_dir=out / "derived",
               metrics_file=out / "metrics.json", rules=RULES, workloads={})
    return out


def query(out: Path, sql: str) -> list[dict]:
    return db_rows(out / "campaign.duckdb", sql)


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

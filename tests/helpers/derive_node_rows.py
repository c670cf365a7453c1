"""Raw node rows of two probes of an eight-GPU node (raw_rows: two quads of NVLink, SYS between
them, an allreduce sweep per group), written into a warehouse (make_warehouse) and derived
(derive_into)."""
from __future__ import annotations

from pathlib import Path

import duckdb

from helpers.db_rows import db_rows
from helpers.derive_rows import RAW_DDL, RULES
from stages.derive import stage as derive

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

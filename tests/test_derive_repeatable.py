"""Derive is repeatable: the same warehouse gives the same campaign tables to the last bit however
many threads DuckDB adds with. The campaign is the node fixture, the CPU fixture run and the two
H200 runs (GPU sampler, /metrics series and trace files), whose energy, power and kernel-time
figures are sums and means of doubles over GPUs, samples and files."""
from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from helpers.db_rows import db_tuples
from stages.core.config import derive_settings, load_params
from stages.derive import stage as derive
from stages.ingest import stage as ingest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
FOLDERS = [*(FIXTURES / "node_campaign" / "runs").iterdir(), *(FIXTURES / "runs").iterdir(),
           *(FIXTURES / "gpu_h200x1").iterdir(), *(FIXTURES / "gpu_h200x1_profiled").iterdir()]


def derive_with(data: Path, threads: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Derive data/warehouse.duckdb into a database of its own, DuckDB held to `threads`."""
    out = data / f"threads-{threads}"
    connect = duckdb.connect
    monkeypatch.setattr(derive.duckdb, "connect",
                        lambda *a, **kw: connect(*a, **{**kw, "config": {"threads": threads}}))
    settings = derive_settings({**load_params(ROOT), "profile": "h200x8"})
    derive.run(warehouse=data / "warehouse.duckdb", campaign_db=out / "campaign.duckdb",
               derived_dir=out / "derived", metrics_file=out / "metrics.json", **settings)
    monkeypatch.setattr(derive.duckdb, "connect", connect)
    return out / "campaign.duckdb"


def test_one_thread_and_four_give_the_same_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    runs = tmp_path / "data" / "runs"
    for folder in FOLDERS:
        if folder.is_dir():
            shutil.copytree(folder, runs / folder.name)
    ingest.run(runs_dir=runs, warehouse=tmp_path / "data" / "warehouse.duckdb", root=tmp_path)
    one, four = (derive_with(tmp_path / "data", n, monkeypatch) for n in (1, 4))
    tables = [t for (t,) in db_tuples(one, "select table_name from information_schema.tables "
                                           "where table_schema = 'main' order by table_name")]
    assert {"point_energy", "point_gpu_energy", "point_profile", "point_metrics_summary"} <= set(tables)
    assert db_tuples(one, "select count(*) from point_energy where idle_power_total_w is not null")[0][0] > 0
    for table in tables:
        # repr keeps every bit of a double; the rows compared as a sorted list
        rows = [sorted(map(repr, db_tuples(db, f"select * from {table}"))) for db in (one, four)]
        assert rows[0] == rows[1], table

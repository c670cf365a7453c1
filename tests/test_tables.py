"""The table registry: a public table is its SQL file and its schema.yaml entry, nothing else."""
from __future__ import annotations

import html
import shutil
from pathlib import Path

import duckdb
import pytest
import yaml

from helpers.derive_rows import derive_into, query
from helpers.render_campaign import PROJECT
from stages.derive import stage as derive
from stages.ingest import rows as ingest_rows
from stages.ingest import nodes as ingest_nodes
from stages.core import raw_schema
from stages.core import catalogue as tables
from stages.render import warehouse_page
from stages.core.config import CampaignError

NEW_MART = """-- Engines of each run, a table added to prove it takes two files.
with source as (
    select run_id, engine from runs
),

final as (
    select run_id, engine, length(run_id) > 0 as named from source
)

select * from final
"""
NEW_ENTRY = {"run_engines": {
    "description": "The engine of each run, for a test.",
    "columns": {"run_id": "The run (see runs).", "engine": "Serving engine.",
                "named": "True when the run has a name."},
    "unique": ["run_id"],
    "not_null": ["run_id", "named"],
    "checks": {"engine_is_known": "select run_id, engine from run_engines where engine not in ('vllm', 'sglang')"},
}}


def sql_copy(tmp_path: Path) -> Path:
    sql_dir = tmp_path / "sql"
    shutil.copytree(tables.SQL_DIR, sql_dir)
    return sql_dir


def add_mart(sql_dir: Path, name: str, sql: str, entry: dict, first: bool = True) -> None:
    """Write marts/<name>.sql and its schema.yaml entry, first in the file (before the marts it
    reads) or last."""
    schema_file = sql_dir / "marts" / "schema.yaml"
    schema = yaml.safe_load(schema_file.read_text())
    schema = {**entry, **schema} if first else {**schema, **entry}
    schema_file.write_text(yaml.safe_dump(schema, sort_keys=False))
    (sql_dir / "marts" / f"{name}.sql").write_text(sql)


def test_a_new_public_table_takes_its_sql_file_and_its_schema_entry(tmp_path, monkeypatch):
    sql_dir = sql_copy(tmp_path)
    add_mart(sql_dir, "run_engines", NEW_MART, NEW_ENTRY)
    monkeypatch.setattr(derive, "SQL_DIR", sql_dir)
    summary, out = derive_into(tmp_path)
    # built after runs although listed before it, tested, exported, counted
    assert list(summary)[:2] == ["run_engines", "runs"] and summary["run_engines"] == 4
    csv = (out / "derived" / "run_engines.csv").read_text().splitlines()
    assert csv[0] == "run_id,engine,named" and len(csv) == 5 and csv[1:] == sorted(csv[1:])
    assert query(out, "select count(*) as n from run_engines where named") == [{"n": 4}]
    con = duckdb.connect(str(out / "campaign.duckdb"), read_only=True)
    try:
        text = html.unescape(warehouse_page.build(
            con=con, descriptions_file=PROJECT / "site" / "warehouse.yaml", sql_dir=sql_dir,
            downloads={"run_engines": "downloads/run_engines.csv"}))
    finally:
        con.close()
    section = text.split("### `run_engines`", 1)[1].split("\n### ", 1)[0]
    assert "The engine of each run, for a test." in section
    assert "| <code>named</code> | <code>boolean</code> | True when the run has a name. |" in section
    assert "Download: [run_engines.csv](downloads/run_engines.csv)" in section
    assert "engine_is_known" in section and "Engines of each run" in section
    assert text.index("### `run_engines`") < text.index("### `runs`")


def test_a_broken_check_of_the_new_table_stops_derive(tmp_path, monkeypatch):
    sql_dir = sql_copy(tmp_path)
    entry = {"run_engines": {**NEW_ENTRY["run_engines"],
                             "checks": {"no_vllm": "select run_id from run_engines where engine = 'vllm'"}}}
    add_mart(sql_dir, "run_engines", NEW_MART, entry, first=False)
    monkeypatch.setattr(derive, "SQL_DIR", sql_dir)
    with pytest.raises(derive.DataTestError, match=r"run_engines\.no_vllm"):
        derive_into(tmp_path)


def test_a_mart_not_public_is_built_but_not_exported(tmp_path, monkeypatch):
    sql_dir = sql_copy(tmp_path)
    add_mart(sql_dir, "run_engines", NEW_MART, {"run_engines": {"public": False}}, first=False)
    monkeypatch.setattr(derive, "SQL_DIR", sql_dir)
    summary, out = derive_into(tmp_path)
    assert "run_engines" not in summary and not (out / "derived" / "run_engines.csv").exists()
    assert query(out, "select count(*) as n from run_engines") == [{"n": 4}]
    assert "int_run_gate_flags" in derive.INTERMEDIATE_MODELS and "int_run_gate_flags" not in derive.PUBLIC_TABLES


def test_marts_are_built_after_what_they_read():
    models = tables.models()
    order = models.build_order()
    for name in (*models.intermediate, *models.marts):
        sql = derive.model_sql(name)
        assert all(order.index(read) < order.index(name)
                   for read in tables.reads(sql, set(order) - {name})), name
    schema = yaml.safe_load((tables.SQL_DIR / "marts" / "schema.yaml").read_text())
    assert models.public == tuple(t for t, spec in schema.items() if spec.get("public", True))
    assert set(models.marts) == set(schema)


def test_a_mart_file_without_entry_or_a_cycle_is_refused(tmp_path):
    sql_dir = sql_copy(tmp_path)
    (sql_dir / "marts" / "orphan.sql").write_text("select 1 as x")
    with pytest.raises(CampaignError, match=r"schema\.yaml: orphan\.sql has no entry"):
        tables.models(sql_dir)
    (sql_dir / "marts" / "orphan.sql").unlink()
    add_mart(sql_dir, "loop_a", "select * from loop_b", {"loop_a": {"public": False}})
    add_mart(sql_dir, "loop_b", "select * from loop_a", {"loop_b": {"public": False}})
    with pytest.raises(CampaignError, match=r"cycle: loop_a, loop_b"):
        tables.models(sql_dir)


def test_an_intermediate_model_may_read_a_mart_and_an_alias_is_not_a_read(tmp_path):
    sql_dir = sql_copy(tmp_path)
    (sql_dir / "intermediate" / "int_gate_counts.sql").write_text(
        "-- a gate count per run\nselect run_id, count(*) as gates from gates group by run_id")
    add_mart(sql_dir, "gate_counts", "select runs.run_id, c.gates from stg_runs as runs\n"
             "join int_gate_counts as c using (run_id)", {"gate_counts": {"public": False}})
    order = tables.models(sql_dir).build_order()
    assert order.index("gates") < order.index("int_gate_counts") < order.index("gate_counts")
    assert tables.reads((sql_dir / "marts" / "gate_counts.sql").read_text(), set(order)) == {
        "stg_runs", "int_gate_counts"}


def test_a_cte_named_like_a_model_is_refused(tmp_path):
    sql_dir = sql_copy(tmp_path)
    add_mart(sql_dir, "run_names", "with runs as (select run_id from stg_runs)\nselect * from runs",
             {"run_names": {"public": False}})
    with pytest.raises(CampaignError, match=r"CTEs named like a model.*run_names \(runs\)"):
        tables.models(sql_dir)


def test_staging_models_come_from_their_files_and_read_their_raw_table(tmp_path):
    models = tables.models()
    assert set(models.staging) == {p.stem for p in (tables.SQL_DIR / "staging").glob("stg_*.sql")}
    assert models.staging["stg_runs"] == "raw_runs" and models.staging["stg_ingest_errors"] == "ingest_errors"
    sql_dir = sql_copy(tmp_path)
    (sql_dir / "staging" / "stg_mixed.sql").write_text("select * from raw.raw_runs join raw.raw_gates using (run_id)")
    with pytest.raises(CampaignError, match=r"stg_mixed\.sql: a staging model reads one raw table"):
        tables.models(sql_dir)


def test_every_raw_table_is_ingests_and_each_only_once():
    names = [t.name for t in raw_schema.raw_tables()]
    owned = [*ingest_rows.RAW_TABLES, *ingest_rows.KEPT_TABLES, *ingest_nodes.NODE_TABLES]
    assert sorted(owned) == sorted(names)
    assert ingest_rows.KEPT_TABLES == ("raw_seals",) and ingest_rows.FOLDER_TABLES == ("raw_folders",)
    assert set(ingest_rows.FILE_TABLES) < set(ingest_rows.ROW_TABLES)
    assert {"ingest_errors", "raw_tampered"} == set(ingest_rows.ROW_TABLES) - set(ingest_rows.FILE_TABLES)
    assert set(derive.STAGING_MODELS.values()) <= set(names)

"""The Warehouse page: raw.sql parsed, every public column described, invariants and downloads."""
from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import duckdb
import pytest
import yaml

from helpers.render_campaign import PROJECT, build_campaign
from stages.derive import stage as derive
from stages.core import catalogue as tables
from stages.render import warehouse_page
from stages.render.warehouse_page import WarehouseDocError

DESCRIPTIONS = PROJECT / "site" / "warehouse.yaml"   # the records of facts.json
SCHEMA = PROJECT / "stages" / "derive" / "sql" / "marts" / "schema.yaml"   # the public tables


def all_descriptions() -> dict:
    return {**warehouse_page.table_docs(tables.models().schema),
            **warehouse_page.load_descriptions(DESCRIPTIONS)}


@pytest.fixture(scope="module")
def derived_db(tmp_path_factory) -> Path:
    """campaign.duckdb as derive builds it (from an empty warehouse): the real public columns."""
    tmp = tmp_path_factory.mktemp("derive")
    warehouse = tmp / "warehouse.duckdb"
    con = duckdb.connect(str(warehouse))
    con.execute(warehouse_page.RAW_SCHEMA.read_text())
    con.close()
    derive.run(warehouse=warehouse, campaign_db=tmp / "campaign.duckdb", derived_dir=tmp / "derived",
               metrics_file=tmp / "metrics.json",
               rules={"prefix_cache_tok_s": 60000, "gate_min_score": 1.0, "cached_share_max_pct": 20,
                      "default_max_num_seqs": 1024, "burst_tpot_ms": 0.5, "cached_mark_pct": 10},
               workloads={"long": {"prompt_tokens": 2048, "output_tokens": 64, "concurrency": [1]}})
    return tmp / "campaign.duckdb"


def described_tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    tables = {t: [c.name for c in cols] for t, cols in warehouse_page.public_columns(con).items()}
    tables[warehouse_page.FACTS_KEY] = [c.name for c in warehouse_page.fact_fields()]
    return tables


def test_every_public_column_derive_builds_has_a_description(derived_db):
    con = duckdb.connect(str(derived_db), read_only=True)
    try:
        described = described_tables(con)
    finally:
        con.close()
    docs = all_descriptions()
    undocumented = [f"{t}.{c}" for t, cols in described.items() for c in cols
                    if not str(docs.get(t, {}).get("columns", {}).get(c) or "").strip()]
    assert undocumented == [], "add these to stages/derive/sql/marts/schema.yaml"
    warehouse_page.check_descriptions(docs, described)  # also: nothing stale, no digits


def test_the_render_fixture_has_the_real_public_columns(derived_db, tmp_path):
    """The render tests' hand-written tables keep the names derive produces."""
    real = duckdb.connect(str(derived_db), read_only=True)
    fixture = duckdb.connect(str(build_campaign(tmp_path)), read_only=True)
    try:
        names = lambda con: {t: [c.name for c in cols]  # noqa: E731
                             for t, cols in warehouse_page.public_columns(con).items()}
        assert names(fixture) == names(real)
    finally:
        real.close()
        fixture.close()


def test_a_column_without_description_fails(tmp_path):
    sql_dir = tmp_path / "sql"
    shutil.copytree(warehouse_page.SQL_DIR, sql_dir)
    docs = yaml.safe_load(SCHEMA.read_text())
    del docs["launches"]["columns"]["kv_tokens"]
    docs["gates"]["columns"]["score"] = "   "
    (sql_dir / "marts" / "schema.yaml").write_text(yaml.safe_dump(docs, sort_keys=False))
    build_campaign(tmp_path)
    con = duckdb.connect(str(tmp_path / "data" / "campaign.duckdb"), read_only=True)
    try:
        with pytest.raises(WarehouseDocError, match=r"schema\.yaml: no description for "
                                                    r"launches\.kv_tokens.*no description for gates\.score"):
            warehouse_page.build(con=con, descriptions_file=DESCRIPTIONS, downloads={},
                                 sql_dir=sql_dir)
    finally:
        con.close()


def test_a_described_column_that_does_not_exist_fails():
    docs = {"runs": {"description": "Runs.", "columns": {"run_id": "Id.", "colour": "Paint."}}}
    with pytest.raises(WarehouseDocError, match=r"runs\.colour is described but the table has no such"):
        warehouse_page.check_descriptions(docs, {"runs": ["run_id"]})
    warehouse_page.check_descriptions(docs, {"runs": ["run_id"]}, stale=False)  # the build's mode


def test_a_typed_number_in_a_description_fails():
    docs = {"runs": {"description": "Runs.", "columns": {"run_id": "Usually about 42 characters."}}}
    with pytest.raises(WarehouseDocError, match=r"runs\.run_id.*'42'"):
        warehouse_page.check_descriptions(docs, {"runs": ["run_id"]})


def test_raw_schema_parsed_with_table_and_column_comments():
    tables = {t.name: t for t in warehouse_page.parse_raw_schema(warehouse_page.RAW_SCHEMA.read_text())}
    assert "raw_folders" in tables and "ingest_errors" in tables
    assert tables["raw_folders"].description == "One row per ingested run folder; drives incremental ingest."
    folder = next(c for c in tables["raw_folders"].columns if c.name == "folder")
    assert folder.type == "varchar" and folder.note == "data/runs/<run_id>"
    # several columns on one line, and a table that shares the comment above the one before it
    names = [c.name for c in tables["raw_commands"].columns]
    assert names[names.index("tp"):names.index("tp") + 5] == ["tp", "dp", "pp", "dcp", "pcp"]
    assert tables["raw_gates"].description == tables["raw_gate_probes"].description
    assert "primary" not in [c.type for c in tables["raw_folders"].columns]


def test_page_lists_models_invariants_and_downloads(tmp_path):
    build_campaign(tmp_path)
    con = duckdb.connect(str(tmp_path / "data" / "campaign.duckdb"), read_only=True)
    try:
        text = warehouse_page.build(con=con, descriptions_file=DESCRIPTIONS,
                                    downloads={"gates": "downloads/gates.csv"})
    finally:
        con.close()
    gates = html.unescape(text.split("### `gates`", 1)[1].split("\n### ", 1)[0])
    assert "Download: [gates.csv](downloads/gates.csv)" in gates
    assert "| <code>passed_probes</code> | <code>integer</code> | Probes whose answer" in gates
    assert "- Unique key: <code>run_id</code>, <code>gate</code>" in gates
    assert "where passed_probes > probes or passed_probes < 0" in gates
    assert "How it is computed" in gates and "no score" in gates  # the mart's own comment
    assert "### `stg_launch_out`" in text and "launch.out key=value lines." in html.unescape(text)
    assert "### `int_requests`" in text
    assert "### `facts` {#table-facts}" in text and "| <code>excerpt</code> |" in text


def test_a_pipe_in_a_column_type_stays_inside_its_table_cell():
    import markdown

    lines = warehouse_page._column_table([(c.name, c.type, "described") for c in warehouse_page.fact_fields()])
    page = markdown.markdown("\n".join(lines), extensions=["tables"])
    rows = [re.findall(r"<t[dh]>(.*?)</t[dh]>", row) for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)]
    assert len(rows) == len(warehouse_page.fact_fields()) + 1
    assert {len(r) for r in rows} == {3}
    unit = next(r for r in rows if r[0] == "<code>unit</code>")
    assert html.unescape(unit[1]) == "<code>str | None</code>" and unit[2] == "described"

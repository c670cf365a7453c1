"""One bad row never stops the campaign: derive holds it back in `quarantine`, publishes the rest,
and the site says what was held back; `--strict` still fails on it."""
from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from helpers.derive_rows import DP, RULES, WORKLOADS, make_warehouse, query, raw_path, raw_rows
from helpers.render_campaign import PROJECT, RUN4, build_campaign, render_kwargs
from stages.cli import main
from stages.core.config import Paths, load_params
from stages.derive import stage as derive
from stages.render import stage as render

BAD_POINT = "chat__c64"


def bad_rows() -> dict:
    """The test campaign with one point claiming more completed requests than it sent."""
    rows = raw_rows()
    point = rows["raw_bench_points"][1][2]
    assert (point["run_id"], point["point_id"]) == (DP, BAD_POINT)
    point["completed"] = 5                      # it sent 3
    return rows


def derive_into(tmp_path: Path, rows: dict, *, strict: bool) -> tuple[dict, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    warehouse = make_warehouse(tmp_path / "warehouse.duckdb", rows)
    out = tmp_path / "out"
    summary = derive.run(warehouse=warehouse, campaign_db=out / "campaign.duckdb",
                         derived_dir=out / "derived", metrics_file=out / "metrics.json",
                         rules=RULES, workloads=WORKLOADS, strict=strict)
    return summary, out


@pytest.fixture(scope="module")
def held(tmp_path_factory) -> tuple[dict, Path]:
    return derive_into(tmp_path_factory.mktemp("held"), bad_rows(), strict=False)


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[dict, Path]:
    return derive_into(tmp_path_factory.mktemp("clean"), raw_rows(), strict=False)


def test_the_row_is_held_back_with_its_test_file_and_reason(held):
    _, out = held
    rows = query(out, "select * from quarantine where table_name = 'bench_points'")
    assert len(rows) == 1
    row = rows[0]
    assert row["test"] == "completed_within_sent" and row["run_id"] == DP and row["node_id"] is None
    assert row["row_key"] == f"run_id={DP}, point_id={BAD_POINT}"
    assert row["reason"].startswith("completed_within_sent: ")
    assert "completed=5" in row["reason"] and "sent=3" in row["reason"]
    assert (row["source_file"], row["source_line"]) == (raw_path(DP, f"bench/{BAD_POINT}.json"), 1)


def test_everything_else_is_derived_and_exported(held, clean):
    summary, out = held
    clean_summary, _ = clean
    assert query(out, "select point_id from bench_points where run_id = $r", {"r": DP}) == []
    assert summary["bench_points"] == clean_summary["bench_points"] - 1
    for table in ("runs", "launches", "gates", "sequences_fit", "launch_log_facts"):
        assert summary[table] == clean_summary[table], table
    csv = (out / "derived" / "quarantine.csv").read_text()
    assert "completed_within_sent" in csv and BAD_POINT in csv
    assert BAD_POINT not in (out / "derived" / "bench_points.csv").read_text()


def test_rows_built_on_the_held_back_one_are_held_back_too(held):
    _, out = held
    # no request, invalid row or engine stats is left pointing at the point that is gone
    for table in ("bench_requests", "invalid_rows", "point_engine_stats"):
        assert query(out, f"select * from {table} where run_id = $r and point_id = $p",
                     {"r": DP, "p": BAD_POINT}) == [], table
    followers = query(out, "select distinct table_name, test from quarantine "
                           "where table_name <> 'bench_points' order by all")
    assert {"table_name": "bench_requests", "test": "request_belongs_to_a_point"} in followers


def test_summary_and_metrics_count_held_back_rows(held, clean):
    summary, out = held
    count = query(out, "select count(*) as n from quarantine")[0]["n"]
    assert count >= 2 and summary["quarantine"] == count
    assert json.loads((out / "metrics.json").read_text())["quarantined_rows"] == count
    assert clean[0]["quarantine"] == 0


def test_strict_fails_on_the_row_and_keeps_the_previous_outputs(tmp_path):
    previous = tmp_path / "out" / "campaign.duckdb"
    previous.parent.mkdir(parents=True)
    previous.write_bytes(b"previous")
    with pytest.raises(derive.DataTestError) as caught:
        derive_into(tmp_path, bad_rows(), strict=True)
    lines = str(caught.value).splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("data test failed: bench_points.completed_within_sent: ")
    assert previous.read_bytes() == b"previous"


def test_duplicate_rows_are_both_held_back_one_line_per_problem_when_strict(tmp_path):
    rows = raw_rows()
    rows["raw_runs"][1].append(dict(rows["raw_runs"][1][0]))
    run_id = rows["raw_runs"][1][0]["run_id"]
    summary, out = derive_into(tmp_path / "lenient", rows, strict=False)
    held = query(out, "select row_key from quarantine where table_name = 'runs' and test = 'unique(run_id)'")
    assert held == [{"row_key": f"run_id={run_id}"}] * 2
    # its attempt group is left without a latest attempt: said once, and nothing more is held back for it
    noted = query(out, "select reason from quarantine where test = 'one_latest_attempt_per_group'")
    assert len(noted) == 1 and "nothing is held back" in noted[0]["reason"]
    assert summary["runs"] == 3
    assert query(out, "select * from runs where run_id = $r", {"r": run_id}) == []
    assert query(out, "select * from launches where run_id = $r", {"r": run_id}) == []
    with pytest.raises(derive.DataTestError, match=r"^data test failed: runs\.unique\(run_id\): "):
        derive_into(tmp_path / "strict", rows, strict=True)


def test_cli_derive_holds_back_and_strict_fails_one_line_per_problem(tmp_path):
    shutil.copy(PROJECT / "params.yaml", tmp_path / "params.yaml")
    paths = Paths.from_params(load_params(tmp_path), tmp_path)
    paths.warehouse.parent.mkdir(parents=True, exist_ok=True)
    make_warehouse(paths.warehouse, bad_rows())
    runner = CliRunner()
    strict = runner.invoke(main, ["derive", "--strict", "--root", str(tmp_path)])
    assert strict.exit_code == 2 and "Traceback" not in strict.output
    assert strict.output.strip().splitlines() == [
        line for line in strict.output.strip().splitlines()
        if line.startswith("campaign: error: data test failed: bench_points.completed_within_sent: ")]
    assert not paths.campaign_db.exists()
    lenient = runner.invoke(main, ["derive", "--root", str(tmp_path)])
    assert lenient.exit_code == 0, lenient.output
    assert "row(s) held back in the quarantine table" in lenient.output
    assert " quarantine=" in lenient.output
    con = duckdb.connect(str(paths.campaign_db), read_only=True)
    try:
        assert con.execute("select count(*) from quarantine where table_name = 'bench_points'"
                           ).fetchone()[0] == 1
    finally:
        con.close()


# ---------------------------------------------------------------- the site


def held_back_campaign(root: Path) -> None:
    """The render fixture's campaign with one row of RUN4 held back, as derive writes it."""
    build_campaign(root)
    con = duckdb.connect(str(root / "data" / "campaign.duckdb"))
    try:
        con.execute(
            "insert into quarantine values ('bench_points', 'completed_within_sent', $run, null, "
            "$key, $file, 7, $reason)",
            {"run": RUN4, "key": f"run_id={RUN4}, point_id=long__c2",
             "file": f"data/runs/{RUN4}/bench/long__c2.json",
             "reason": f"completed_within_sent: run_id='{RUN4}', sent=3, completed=5"})
    finally:
        con.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("held-back-site")
    held_back_campaign(root)
    render.run(**render_kwargs(root))
    return root / "data" / "docs"


def test_the_part_and_the_warehouse_page_list_the_row_and_its_reason(site):
    part = html.unescape((site / "posts" / "part-local-cpu.md").read_text())
    warehouse = html.unescape((site / "warehouse.md").read_text())
    for text in (part, warehouse):
        assert "Held back" in text
        assert f"run_id={RUN4}, point_id=long__c2" in text
        assert f"data/runs/{RUN4}/bench/long__c2.json, line 7" in text
        assert f"completed_within_sent: run_id='{RUN4}', sent=3, completed=5" in text
    assert "(../warehouse.md#table-quarantine)" in part
    assert "### `quarantine` {#table-quarantine}" in warehouse


def test_nothing_is_said_when_nothing_was_held_back(tmp_path):
    root = tmp_path / "campaign"
    build_campaign(root)
    render.run(**render_kwargs(root))
    docs = root / "data" / "docs"
    assert "Held back" not in (docs / "posts" / "part-local-cpu.md").read_text()
    assert "Held back" not in (docs / "warehouse.md").read_text()


# ---------------------------------------------------------------- node tables


def test_a_wrong_sum_is_held_back_and_its_peak_built_without_it(tmp_path):
    from helpers import derive_node_rows as nodes
    rows = nodes.raw_rows()
    bad = rows["raw_node_allreduce"][3]
    bad["correct"] = False
    warehouse = nodes.make_warehouse(tmp_path / "warehouse.duckdb", rows)
    out = tmp_path / "out"
    derive.run(warehouse=warehouse, campaign_db=out / "campaign.duckdb", derived_dir=out / "derived",
               metrics_file=out / "metrics.json", rules=nodes.RULES, workloads={}, strict=False)
    held = query(out, "select * from quarantine")
    assert [(h["table_name"], h["test"], h["node_id"], h["run_id"]) for h in held] == [
        ("node_allreduce", "correct_is_true", bad["node_id"], None)]
    assert held[0]["row_key"] == (f"node_id={bad['node_id']}, gpu_group={bad['group_label']}, "
                                  f"message_bytes={bad['bytes']}")
    assert (held[0]["source_file"], held[0]["source_line"]) == (bad["source_file"], bad["source_line"])
    # the peak of its group is built from the measurements that were kept, all correct
    assert query(out, "select count(*) as n from node_allreduce_peak where not all_correct") == [{"n": 0}]
    assert query(out, "select count(*) as n from node_allreduce where node_id = $n and gpu_group = $g "
                      "and message_bytes = $b", {"n": bad["node_id"], "g": bad["group_label"],
                                                 "b": bad["bytes"]}) == [{"n": 0}]
    # a Part of that node lists it; a Part of runs only does not
    sql = (PROJECT / "stages" / "render" / "sql" / "render" / "held_back_rows.sql").read_text()
    con = duckdb.connect(str(out / "campaign.duckdb"), read_only=True)
    try:
        of_node = con.execute(sql, {"run_ids": None, "node_ids": [bad["node_id"]]}).fetchall()
        of_runs = con.execute(sql, {"run_ids": [DP], "node_ids": None}).fetchall()
        every = con.execute(sql, {"run_ids": None, "node_ids": None}).fetchall()
    finally:
        con.close()
    assert len(of_node) == 1 and of_runs == [] and every == of_node
    assert of_node[0][3].startswith("correct_is_true: ")

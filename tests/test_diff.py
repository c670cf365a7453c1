"""campaign diff on two image tags: every matched point with both values and a mark."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from stages.render import diff
from stages.cli import main
from stages.core.config import CampaignError, Paths

ROOT = Path(__file__).resolve().parent.parent
OLD, NEW = "vllm/vllm-openai:v0.31.0", "vllm/vllm-openai:nightly-1a001d58"


def run_row(run_id, model, layout, image, spec):
    return (run_id, spec, "h200x8", model, layout, "256k", "vllm", image, True)


def build(db_file: Path) -> None:
    with duckdb.connect(str(db_file)) as db:
        db.execute("""
          create table runs (run_id varchar, spec varchar, profile varchar, model varchar,
            layout varchar, ctx_label varchar, engine varchar, image varchar, is_current boolean,
            started_at timestamptz default '2026-11-16 06:00:00+00');
          create table launches (run_id varchar, status varchar, ready_s double, kv_tokens bigint,
            max_model_len bigint, kv_cache_dtype varchar);
          create table gates (run_id varchar, gate varchar, score double);
          create table bench_points (run_id varchar, workload varchar, concurrency integer,
            sent integer, completed integer, ttft_median_s double, ttft_p90_s double,
            tpot_median_ms double, output_tok_s double, capacity_limited boolean,
            provisional boolean);""")
        runs = [run_row("glm_old", "glm53", "tp8", OLD, "glm-old"),
                run_row("glm_new", "glm53", "tp8", NEW, "glm-new"),
                run_row("dsv_old", "dsv4", "tep8", OLD, "dsv-old"),
                run_row("dsv_new", "dsv4", "tep8", NEW, "dsv-new"),
                run_row("mm_old", "minimax", "tep8", OLD, "mm-old"),
                run_row("mm_new", "minimax", "tep8", NEW, "mm-new")]
        db.executemany("insert into runs (run_id, spec, profile, model, layout, ctx_label, engine, image, "
                       "is_current) values (?, ?, ?, ?, ?, ?, ?, ?, ?)", runs)
        db.executemany("insert into launches values (?, ?, ?, ?, ?, ?)", [
            ("glm_old", "ready", 600.0, 5659136, 262144, "fp8"),
            ("glm_new", "ready", 500.0, 5659136, 262144, "fp8"),
            ("dsv_old", "ready", 775.0, 1573325, 262144, "fp8"),
            ("dsv_new", "ready", 770.0, 1573325, 1048576, "fp8"),      # other max model length
            ("mm_old", "failed", None, None, 262144, "fp8"),
            ("mm_new", "ready", 559.0, 3749120, 262144, "fp8")])
        db.executemany("insert into gates values (?, 'niah', ?)",
                       [("glm_old", 1.0), ("glm_new", 1.0), ("dsv_old", 1.0), ("dsv_new", 1.0),
                        ("mm_new", 0.67)])
        db.executemany("insert into bench_points values (?, ?, ?, ?, ?, ?, ?, ?, ?, false, false)", [
            ("glm_old", "long", 1, 4, 4, 148.0, 150.0, 29.0, 30.0),
            ("glm_new", "long", 1, 4, 4, 120.0, 160.0, 29.5, 30.1),   # better, worse, same, same
            ("glm_old", "long", 4, 8, 8, 300.0, 320.0, 31.0, 80.0),
            ("glm_new", "long", 4, 8, 6, 310.0, 330.0, 31.0, 70.0),   # new failure
            ("glm_old", "chat", 8, 16, 12, 1.0, 2.0, 10.0, 500.0),
            ("glm_new", "chat", 8, 16, 16, 1.0, 2.0, 10.0, 500.0),    # fixed
            ("dsv_old", "long", 1, 4, 4, 30.0, 31.0, 22.0, 40.0),
            ("dsv_new", "long", 1, 4, 4, 25.0, 26.0, 22.0, 40.0),     # not comparable
            ("mm_new", "long", 1, 4, 4, 29.9, 30.0, 19.2, 50.0)])     # only in head
        db.execute("alter table bench_points add column ttft_requests integer default 4")
        # at 16 users the head's requests all came from the prefix cache (no TTFT), and its
        # concurrency is above what fits
        db.executemany("insert into bench_points values (?, 'long', 16, 16, 16, ?, ?, 30.0, 90.0, ?,"
                       " false, ?)", [("glm_old", 40.0, 44.0, False, 16), ("glm_new", None, None, True, 0)])


@pytest.fixture()
def result(tmp_path):
    db_file = tmp_path / "campaign.duckdb"
    build(db_file)
    params = {"specs": {}, "run_sets": {}}
    paths = Paths.from_params(yaml.safe_load((ROOT / "params.yaml").read_text()), ROOT)
    with duckdb.connect(str(db_file), read_only=True) as db:
        base = diff.resolve("v0.31.0", params=params, paths=paths, current=db)
        head = diff.resolve(NEW, params=params, paths=paths, current=db)
        yield diff.compare(base, head, tolerance_pct=5.0)


def mark(result, model, workload, concurrency, metric):
    [row] = [r for r in result.points if r["match_key"].startswith(model)
             and r["workload"] == workload and r["concurrency"] == concurrency
             and r["metric"] == metric]
    return row


def test_images_resolve_by_tag_and_match_on_model_and_layout(result):
    assert result.key_attrs == ["model", "layout", "ctx_label"]
    assert {r["match_key"] for r in result.points} == {
        "glm53 / tp8 / 256k", "dsv4 / tep8 / 256k", "minimax / tep8 / 256k"}


def test_every_matched_point_has_both_values_and_a_mark(result):
    row = mark(result, "glm53", "long", 1, "ttft_median_s")
    assert (row["base_value"], row["head_value"], row["mark"]) == (148.0, 120.0, "better")
    assert round(row["change_pct"], 1) == -18.9
    assert mark(result, "glm53", "long", 1, "ttft_p90_s")["mark"] == "worse"
    assert mark(result, "glm53", "long", 1, "tpot_median_ms")["mark"] == "same"
    assert mark(result, "glm53", "long", 4, "completed_pct")["mark"] == "new failure"
    assert mark(result, "glm53", "chat", 8, "completed_pct")["mark"] == "fixed"
    assert mark(result, "dsv4", "long", 1, "ttft_median_s")["mark"] == "not comparable"
    assert mark(result, "minimax", "long", 1, "ttft_median_s")["mark"] == "only in head"
    assert all(r["mark"] for r in result.points)


def test_a_point_without_ttft_is_not_compared_and_the_note_names_the_side(result):
    for metric in ("ttft_median_s", "ttft_p90_s"):
        row = mark(result, "glm53", "long", 16, metric)
        assert (row["base_value"], row["head_value"], row["mark"]) == (40.0 if "median" in metric else 44.0,
                                                                      None, "no TTFT")
        assert row["note"] == ("capacity-limited (head), no TTFT (head): every request failed or came "
                               "from the prefix cache")
    tpot = mark(result, "glm53", "long", 16, "tpot_median_ms")
    assert (tpot["mark"], tpot["note"]) == ("same", "capacity-limited (head)")
    assert mark(result, "glm53", "long", 1, "ttft_median_s")["note"] is None
    text = diff.render(result, "table")
    assert "no TTFT (head): every request failed" in text and "2 no TTFT" in text


def test_launch_outcomes_and_gates_are_compared(result):
    rows = {(r["match_key"].split(" /")[0], r["item"]): r for r in result.launches}
    assert rows[("minimax", "status")]["mark"] == "fixed"
    assert rows[("glm53", "ready_s")]["mark"] == "better"
    assert rows[("glm53", "gate_score")]["mark"] == "same"


@pytest.mark.parametrize("fmt, needle", [("table", "new failure"), ("markdown", "| glm53 / tp8 / 256k |"),
                                         ("csv", "table,"), ("json", '"mark": "fixed"')])
def test_output_formats(result, fmt, needle):
    assert needle in diff.render(result, fmt)


def test_two_local_specs_differ_in_layout_so_layout_is_not_matched():
    base = [{"model": "tiny", "layout": "cpu_seqs4", "ctx_label": "4k"}]
    head = [{"model": "tiny", "layout": "cpu_seqs16", "ctx_label": "4k"}]
    assert diff.match_attributes(base, head) == ["model", "ctx_label"]


def test_unknown_side_is_one_line(tmp_path):
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    build(tmp_path / "data" / "campaign.duckdb") if (tmp_path / "data").mkdir() is None else None
    out = CliRunner().invoke(main, ["diff", "--base", "nope", "--head", "tiny-seqs4",
                                    "--root", str(tmp_path)])
    assert out.exit_code == 2 and out.output.startswith("campaign: error: 'nope' is not a run set")


def test_empty_side_is_an_error(tmp_path):
    db_file = tmp_path / "c.duckdb"
    build(db_file)
    with duckdb.connect(str(db_file), read_only=True) as db:
        side = diff.Side("x", [], "current", db)
        with pytest.raises(CampaignError, match="selects no runs"):
            diff.compare(side, side)


def test_facts_diff_lists_changed_new_and_removed_numbers():
    base = {"a": {"id": "a", "value": 627.5, "display": "627.5", "run_ids": ["r1"], "pages": ["p5.md"]},
            "b": {"id": "b", "value": 6, "display": "6", "run_ids": ["r1"], "pages": ["p5.md"]},
            "gone": {"id": "gone", "value": 1, "display": "1", "run_ids": [], "pages": []}}
    head = {"a": {"id": "a", "value": 508.0, "display": "508", "run_ids": ["r2"], "pages": ["p5.md"]},
            "b": {"id": "b", "value": 6, "display": "6", "run_ids": ["r2"], "pages": ["p5.md"]},
            "new": {"id": "new", "value": 3, "display": "3", "run_ids": ["r2"], "pages": []}}
    rows = {r["fact"]: r for r in diff.diff_facts(base, head)}
    assert set(rows) == {"a", "gone", "new"}
    assert (rows["a"]["change"], rows["a"]["base_value"], rows["a"]["head_value"]) == ("changed", "627.5", "508")
    assert (rows["a"]["base_runs"], rows["a"]["head_runs"]) == ("r1", "r2")
    assert rows["gone"]["change"] == "removed" and rows["new"]["change"] == "new"
    assert "3 published numbers differ" in diff.render_facts(list(rows.values()), "table", "v1", "v2")


def test_agents_workloads_are_compared_like_points_where_a_side_has_them(tmp_path):
    db_file = tmp_path / "campaign.duckdb"
    build(db_file)
    with duckdb.connect(str(db_file)) as db:
        db.execute("""create table agent_runs (run_id varchar, workload varchar, sessions integer,
            sent integer, completed integer, ttft_median_s double, ttft_p90_s double,
            tpot_median_ms double, output_tok_s double, provisional boolean)""")
        db.executemany("insert into agent_runs values (?, 'agents-200k', 8, 32, ?, ?, ?, 30.0, ?, false)", [
            ("glm_old", 32, 5.7, 9.0, 75.5),
            ("glm_new", 32, 4.0, 8.0, 60.0)])
    params = {"specs": {}, "run_sets": {}}
    paths = Paths.from_params(yaml.safe_load((ROOT / "params.yaml").read_text()), ROOT)
    with duckdb.connect(str(db_file), read_only=True) as db:
        base = diff.resolve("v0.31.0", params=params, paths=paths, current=db)
        head = diff.resolve(NEW, params=params, paths=paths, current=db)
        result = diff.compare(base, head, tolerance_pct=5.0)
    ttft = mark(result, "glm53", "agents-200k", 8, "ttft_median_s")
    assert (ttft["base_value"], ttft["head_value"], ttft["mark"]) == (5.7, 4.0, "better")
    assert mark(result, "glm53", "agents-200k", 8, "output_tok_s")["mark"] == "worse"
    assert mark(result, "glm53", "agents-200k", 8, "completed_pct")["mark"] == "same"
    assert mark(result, "glm53", "long", 1, "ttft_median_s")["mark"] == "better"   # points unchanged

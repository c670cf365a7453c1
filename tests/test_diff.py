"""campaign diff on two image tags: every matched point with both values and a mark."""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import duckdb
import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from stages.render import diff, diff_facts, diff_sides
from stages.cli import main
from stages.core.config import CampaignError, Paths

ROOT = Path(__file__).resolve().parent.parent
OLD, NEW = "vllm/vllm-openai:v0.31.0", "vllm/vllm-openai:nightly-1a001d58"


SPREAD = np.linspace(-1.0, 1.0, 40)
GLM_LONG_1 = [("glm_old", 148.0 + 2 * SPREAD, 29.0 + 0.2 * SPREAD),
              ("glm_new", np.concatenate([120.0 + 2 * np.linspace(-1, 1, 28), 165.0 + 5 * np.linspace(-1, 1, 12)]),
               29.5 + 0.2 * SPREAD)]


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
            ("glm_old", "long", 1, 40, 40, 148.0, 149.6, 29.0, 30.0),
            ("glm_new", "long", 1, 40, 40, 120.9, 166.5, 29.5, 30.1),  # better, worse, same, unclear
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
        # the requests of glm53 long at one user, 40 a side: the head's TTFT median lies well
        # below the base's, its p90 well above (a slow tail of 12 requests), its TPOT 1.7% higher
        db.execute("""create table bench_requests (run_id varchar, workload varchar, concurrency integer,
            request_idx integer, ttft_s double, tpot_ms double, ok boolean, valid boolean)""")
        db.executemany("insert into bench_requests values (?, 'long', 1, ?, ?, ?, true, true)",
                       [(run, i, float(t), float(p)) for run, ttft, tpot in GLM_LONG_1
                        for i, (t, p) in enumerate(zip(ttft, tpot))])


def compare_releases(db_file: Path):
    """The diff of the campaign in db_file: image v0.31.0 against NEW, at a 5% tolerance."""
    params = {"specs": {}, "run_sets": {}}
    paths = Paths.from_params(yaml.safe_load((ROOT / "params.yaml").read_text()), ROOT)
    with duckdb.connect(str(db_file), read_only=True) as db:
        base = diff.resolve("v0.31.0", params=params, paths=paths, current=db)
        head = diff.resolve(NEW, params=params, paths=paths, current=db)
        return diff.compare(base, head, tolerance_pct=5.0)


@pytest.fixture()
def result(tmp_path):
    db_file = tmp_path / "campaign.duckdb"
    build(db_file)
    return compare_releases(db_file)


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
    assert (row["base_value"], row["head_value"], row["mark"]) == (148.0, 120.9, "better")
    assert round(row["change_pct"], 1) == -18.3
    # the interval of the change lies wholly below -5% and holds the change of the medians
    assert row["ci_low_pct"] < row["change_pct"] < row["ci_high_pct"] < -5.0
    assert (row["n_base"], row["n_head"]) == (40, 40)
    p90 = mark(result, "glm53", "long", 1, "ttft_p90_s")
    assert p90["mark"] == "worse" and 5.0 < p90["ci_low_pct"]
    tpot = mark(result, "glm53", "long", 1, "tpot_median_ms")
    assert tpot["mark"] == "same" and -5.0 <= tpot["ci_low_pct"] < tpot["ci_high_pct"] <= 5.0
    # one throughput a side (no repeats): nothing to tell its noise by
    tput = mark(result, "glm53", "long", 1, "output_tok_s")
    assert (tput["mark"], tput["ci_low_pct"], tput["n_base"], tput["n_head"]) == ("unclear", None, 1, 1)
    assert tput["note"] == "too few repeats (base 1, head 1; 2 a side needed)"
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
    # no requests recorded for this point: its TPOT cannot be told from noise, and the note says
    # how many requests each side had
    tpot = mark(result, "glm53", "long", 16, "tpot_median_ms")
    assert (tpot["mark"], tpot["note"]) == ("unclear", "capacity-limited (head), too few requests "
                                                       "(base 0, head 0; 5 a side needed)")
    assert mark(result, "glm53", "long", 1, "ttft_median_s")["note"] is None
    text = diff.render(result, "table")
    assert "no TTFT (head): every request failed" in text and "2 no TTFT" in text
    assert "too few requests (base 0, head 0" in text


def test_launch_outcomes_and_gates_are_compared(result):
    rows = {(r["match_key"].split(" /")[0], r["item"]): r for r in result.launches}
    assert rows[("minimax", "status")]["mark"] == "fixed"
    ready = rows[("glm53", "ready_s")]                  # one start-up a side: not told from noise
    assert (ready["mark"], ready["note"]) == ("unclear", "one launch a side")
    assert ready["change_pct"] < -5                     # a change beyond the tolerance all the same
    assert rows[("glm53", "kv_tokens")]["note"] is None
    assert rows[("glm53", "gate_score")]["mark"] == "same"


@pytest.mark.parametrize("fmt, needle", [("table", "new failure"), ("markdown", "| glm53 / tp8 / 256k |"),
                                         ("csv", "table,"), ("json", '"mark": "fixed"')])
def test_output_formats(result, fmt, needle):
    assert needle in diff.render(result, fmt)


def test_outputs_open_with_the_summary_and_show_the_interval_and_n(result):
    counts = {r["workload"]: r for r in diff.summary(result)}
    # long: better (glm53 TTFT median at one user), worse (its p90), same (its TPOT, and the
    # completed share at one and at 16 users); unclear: the throughputs (one repeat a side) and the
    # latencies of the points without requests (7); other: new failure, no TTFT, only in head, ...
    assert (counts["long"]["better"], counts["long"]["worse"], counts["long"]["same"]) == (1, 1, 3)
    assert counts["long"]["unclear"] == 7
    assert sum(counts["long"][m] for m in (*diff.SUMMARY_MARKS, "other")) == \
        len([r for r in result.points if r["workload"] == "long"])
    text = diff.render(result, "table")
    assert text.startswith("Summary: 1 better, 1 worse, 11 unclear, 3 same (of ")
    assert "95% intervals" in text.splitlines()[0]
    row = next(l for l in text.splitlines() if "ttft_median_s" in l and "better" in l)
    assert "40 / 40" in row and re.search(r"\[-\d+\.\d%, -\d+\.\d%\]", row)
    markdown = diff.render(result, "markdown")
    assert markdown.startswith("### Summary: ") and "| n base / head |" in markdown
    data = json.loads(diff.render(result, "json"))
    assert data["confidence"] == 0.95 and {r["workload"] for r in data["summary"]} == {"long", "chat"}
    [better] = [r for r in data["points"] if r["mark"] == "better" and r["metric"] == "ttft_median_s"]
    assert better["base_samples"]["n"] == 40 and better["head_samples"]["median"] == pytest.approx(120.889, abs=1e-3)
    rows = list(csv.DictReader(io.StringIO(diff.render(result, "csv"))))
    assert rows[0]["table"] == "summary" and "1 better" in rows[0]["mark"] + rows[1]["mark"]
    assert any(r["table"] == "points" and r["ci_low_pct"] and r["n_base"] == "40" for r in rows)


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
        side = diff_sides.Side("x", [], "current", db)
        with pytest.raises(CampaignError, match="selects no runs"):
            diff.compare(side, side)


def test_facts_diff_lists_changed_new_and_removed_numbers():
    base = {"a": {"id": "a", "value": 627.5, "display": "627.5", "run_ids": ["r1"], "pages": ["p5.md"]},
            "b": {"id": "b", "value": 6, "display": "6", "run_ids": ["r1"], "pages": ["p5.md"]},
            "gone": {"id": "gone", "value": 1, "display": "1", "run_ids": [], "pages": []}}
    head = {"a": {"id": "a", "value": 508.0, "display": "508", "run_ids": ["r2"], "pages": ["p5.md"]},
            "b": {"id": "b", "value": 6, "display": "6", "run_ids": ["r2"], "pages": ["p5.md"]},
            "new": {"id": "new", "value": 3, "display": "3", "run_ids": ["r2"], "pages": []}}
    rows = {r["fact"]: r for r in diff_facts.diff_facts(base, head)}
    assert set(rows) == {"a", "gone", "new"}
    assert (rows["a"]["change"], rows["a"]["base_value"], rows["a"]["head_value"]) == ("changed", "627.5", "508")
    assert (rows["a"]["base_runs"], rows["a"]["head_runs"]) == ("r1", "r2")
    assert rows["gone"]["change"] == "removed" and rows["new"]["change"] == "new"
    assert "3 published numbers differ" in diff_facts.render_facts(list(rows.values()), "table", "v1", "v2")


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
        db.execute("""create table turn_requests (run_id varchar, workload varchar, kind varchar,
            request_idx integer, ttft_s double, tpot_ms double, ok boolean, burst boolean)""")
        spread = np.linspace(-0.3, 0.3, 32)
        db.executemany("insert into turn_requests values (?, 'agents-200k', 'agents', ?, ?, 30.0, true, false)",
                       [(run, i, float(centre + d)) for run, centre in (("glm_old", 5.7), ("glm_new", 4.0))
                        for i, d in enumerate(spread)])
        # a ramp's requests are not the agents workload's samples
        db.executemany("insert into turn_requests values ('glm_new', 'agents-200k', 'ramp', ?, 50.0, 30.0, true, false)",
                       [(100 + i,) for i in range(64)])
    result = compare_releases(db_file)
    ttft = mark(result, "glm53", "agents-200k", 8, "ttft_median_s")
    assert (ttft["base_value"], ttft["head_value"], ttft["mark"]) == (5.7, 4.0, "better")
    assert (ttft["n_base"], ttft["n_head"]) == (32, 32) and ttft["ci_high_pct"] < -25.0
    assert mark(result, "glm53", "agents-200k", 8, "tpot_median_ms")["mark"] == "same"
    # 75.5 against 60 tok/s, but one run a side: unclear, not worse
    tput = mark(result, "glm53", "agents-200k", 8, "output_tok_s")
    assert (tput["mark"], tput["n_base"], tput["n_head"]) == ("unclear", 1, 1)
    assert mark(result, "glm53", "agents-200k", 8, "completed_pct")["mark"] == "same"
    assert mark(result, "glm53", "long", 1, "ttft_median_s")["mark"] == "better"   # points unchanged


def test_repeats_of_a_point_are_pooled_and_throughput_is_compared_across_them(tmp_path):
    db_file = tmp_path / "campaign.duckdb"
    build(db_file)
    with duckdb.connect(str(db_file)) as db:
        # glm53 long at one user ran three times a side: the repeats' requests pool into one sample,
        # their throughputs (one a repeat) are the samples of the throughput's change
        db.execute("alter table bench_points add column repeat integer default 1")
        db.execute("alter table bench_requests add column repeat integer default 1")
        tput = {"glm_old": (30.0, 30.4, 29.7), "glm_new": (36.2, 35.8, 36.5)}
        db.execute("update bench_points set output_tok_s = 30.0 where run_id = 'glm_old' and workload = 'long' "
                   "and concurrency = 1")
        db.execute("update bench_points set output_tok_s = 36.2 where run_id = 'glm_new' and workload = 'long' "
                   "and concurrency = 1")
        for run, values in tput.items():
            for rep, value in ((2, values[1]), (3, values[2])):
                db.execute("insert into bench_points select run_id, workload, concurrency, sent, completed, "
                           "ttft_median_s, ttft_p90_s, tpot_median_ms, ? as output_tok_s, capacity_limited, "
                           "provisional, ttft_requests, ? as repeat from bench_points where run_id = ? "
                           "and workload = 'long' and concurrency = 1 and repeat = 1", [value, rep, run])
                db.execute("insert into bench_requests select run_id, workload, concurrency, request_idx, "
                           "ttft_s * 1.001, tpot_ms, ok, valid, ? from bench_requests where run_id = ? "
                           "and repeat = 1", [rep, run])
    result = compare_releases(db_file)
    out = mark(result, "glm53", "long", 1, "output_tok_s")
    assert (out["n_base"], out["n_head"], out["mark"]) == (3, 3, "better")
    assert out["base_value"] == pytest.approx(sum(tput["glm_old"]) / 3)
    assert out["ci_low_pct"] > 5.0 and out["note"] is None
    assert out["base_samples"]["values"] == sorted(tput["glm_old"])
    ttft = mark(result, "glm53", "long", 1, "ttft_median_s")
    assert (ttft["n_base"], ttft["n_head"], ttft["mark"]) == (120, 120, "better")
    # one row per point however many repeats it has
    assert len([r for r in result.points if r["match_key"].startswith("glm53") and r["workload"] == "long"
                and r["concurrency"] == 1]) == 5
    # a point with one repeat a side keeps its throughput unclear
    assert mark(result, "glm53", "long", 4, "output_tok_s")["mark"] == "unclear"


def test_request_samples_leave_out_what_the_point_figures_leave_out(tmp_path):
    db_file = tmp_path / "campaign.duckdb"
    build(db_file)
    with duckdb.connect(str(db_file)) as db:
        db.execute("alter table bench_requests add column point_id varchar default 'long__c01'")
        db.execute("create table invalid_rows (run_id varchar, point_id varchar, request_idx integer, "
                   "reason varchar)")
        # of the head's 40 requests: 10 from the prefix cache (no TTFT), 5 whose output came in one
        # burst (no TPOT), 3 with a short output (kept in both, as bench_points keeps them)
        db.executemany("insert into invalid_rows values ('glm_new', 'long__c01', ?, ?)",
                       [(i, "prefix_cache") for i in range(10)] + [(i, "burst_output") for i in range(10, 15)]
                       + [(i, "short_output") for i in range(15, 18)])
        db.execute("update bench_requests set valid = false where run_id = 'glm_new' and request_idx < 18")
    result = compare_releases(db_file)
    ttft = mark(result, "glm53", "long", 1, "ttft_median_s")
    tpot = mark(result, "glm53", "long", 1, "tpot_median_ms")
    assert (ttft["n_base"], ttft["n_head"]) == (40, 30)
    assert (tpot["n_base"], tpot["n_head"]) == (40, 35)


def test_facts_diff_says_which_changed_medians_moved_outside_their_interval():
    def fact(fid, value, values, statistic="median"):
        return {"id": fid, "value": value, "display": f"{value:.3g}", "run_ids": ["r"], "pages": ["p.md"],
                "statistic": statistic, "input_rows": [{"value": v, "used": True} for v in values]
                + [{"value": 99.0, "used": False}]}       # left out of the statistic: not a sample
    rng = np.random.default_rng(1)
    same = rng.normal(1.0, 0.1, 40)
    base = {"moved": fact("moved", 1.0, same), "noise": fact("noise", 1.0, same),
            "few": fact("few", 1.0, [1.0, 1.1]), "count": fact("count", 4, [1, 2, 3, 4], "count")}
    head = {"moved": fact("moved", 1.5, same * 1.5),
            "noise": fact("noise", 1.01, rng.normal(1.0, 0.1, 40)),
            "few": fact("few", 2.0, [2.0, 2.2]), "count": fact("count", 5, [1, 2, 3, 4, 5], "count")}
    rows = {r["fact"]: r for r in diff_facts.diff_facts(base, head)}
    assert rows["moved"]["outside"] is True and rows["moved"]["ci_low_pct"] > 40
    assert (rows["moved"]["n_base"], rows["moved"]["n_head"]) == (40, 40)
    assert rows["noise"]["outside"] is False and rows["noise"]["ci_low_pct"] < 0 < rows["noise"]["ci_high_pct"]
    # too few inputs a side, or a fact that is no median or p90: no interval, nothing said
    assert rows["few"]["outside"] is None and (rows["few"]["n_base"], rows["few"]["n_head"]) == (2, 2)
    assert rows["count"]["outside"] is None and rows["count"]["n_base"] is None
    text = diff_facts.render_facts(list(rows.values()), "table", "v1", "v2")
    assert "4 published numbers differ between v1 and v2; 1 of the 2 with an interval moved outside it" in text
    line = next(l for l in text.splitlines() if l.startswith("moved "))
    assert " yes " in line and "40 / 40" in line
    assert json.loads(diff_facts.render_facts(list(rows.values()), "json", "v1", "v2"))["facts"][0]["fact"] == "count"
    assert "ci_low_pct" in diff_facts.render_facts(list(rows.values()), "csv", "v1", "v2").splitlines()[0]

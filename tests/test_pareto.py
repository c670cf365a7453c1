"""The setup comparison's marts on constructed points: which points are on a setup's Pareto
frontier, the figure read along a frontier at the compared speed (only where two frontier points
bracket it), and the cost of a million output tokens, each against values worked out by hand.
"""
from __future__ import annotations

import duckdb
import pytest
import yaml

from helpers.db_rows import rows_of
from stages.core.config import CampaignError
from stages.derive import stage as derive
from stages.derive.costs import create_cost_tables

MARTS = ("int_pareto_candidates", "pareto_points", "pareto_compare", "point_cost")

# (run_id, gpus as meta.json lists them, is_current)
RUNS = [
    ("a-run", "0,1,2,3,4,5,6,7", True),     # setup A: eight GPUs
    ("b-run", "4,5,6,7", True),             # setup B: four GPUs
    ("c-run", "0,1", True),                 # setup C: two GPUs
    ("old-run", "0,1,2,3", False),          # an earlier attempt: not placed
    ("cpu-run", None, True),                # no GPU set: not placed
]
SETUP = {"a-run": ("ma", "tp8"), "b-run": ("mb", "tp4"), "c-run": ("mc", "tp2"),
         "old-run": ("ma", "tp8"), "cpu-run": ("mx", "cpu")}
# (run_id, point_id, workload, concurrency, output_tok_s, decode_tok_s_per_user)
POINTS = [
    # setup A, per GPU: (100 tok/s per user, 10/GPU), (80, 50), (60, 40) beaten by (80, 50), (40, 90)
    ("a-run", "w__c01", "w", 1, 80.0, 100.0),
    ("a-run", "w__c04", "w", 4, 400.0, 80.0),
    ("a-run", "w__c08", "w", 8, 320.0, 60.0),
    ("a-run", "w__c16", "w", 16, 720.0, 40.0),
    # setup B: every point faster per user than the compared speed (90)
    ("b-run", "w__c01", "w", 1, 40.0, 150.0),
    ("b-run", "w__c02", "w", 2, 60.0, 120.0),
    # setup C: one point exactly at the compared speed, one slower
    ("c-run", "w__c01", "w", 1, 30.0, 90.0),
    ("c-run", "w__c02", "w", 2, 50.0, 70.0),
    # setup C on another workload: every point slower than the compared speed
    ("c-run", "v__c01", "v", 1, 20.0, 50.0),
    ("old-run", "w__c01", "w", 1, 999.0, 999.0),
    ("cpu-run", "w__c01", "w", 1, 5.0, 5.0),
    ("a-run", "w__c32", "w", 32, None, 30.0),   # no throughput: no place
]
PRICES = {"cheap": {"usd_per_gpu_hour": 2.0, "source": "S19"},
          "dear": {"usd_per_gpu_hour": 4.5, "source": "S20"}}


def build(speed: float | None = 90.0, prices: dict | None = None,
          by_workload: dict | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("create table runs (run_id varchar, spec varchar, profile varchar, model varchar, "
                "layout varchar, engine varchar, image varchar, is_current boolean, gpus varchar, "
                "gpu_count integer, source_file varchar, source_line integer)")
    con.executemany("insert into runs values (?, ?, 'node', ?, ?, 'vllm', 'img:1', ?, ?, ?, ?, 1)",
                    [(r, r, *SETUP[r], cur, g, len(g.split(",")) if g else None,
                      f"data/runs/{r}/meta.json") for r, g, cur in RUNS])
    con.execute("create table run_inferred (run_id varchar, field varchar, value varchar, "
                "how varchar, source_file varchar, source_line integer)")
    con.execute("create table bench_points (run_id varchar, point_id varchar, workload varchar, "
                "concurrency integer, repeat integer, completed integer, output_tok_s double, "
                "tpot_median_ms double, "
                "decode_tok_s_per_user double, capacity_limited boolean, provisional boolean, "
                "source_file varchar, source_line integer, concurrency_line integer)")
    con.executemany("insert into bench_points values (?, ?, ?, ?, 1, 1, ?, 1000.0 / ?, ?, false, false, ?, 1, 1)",
                    [(r, p, w, c, out, dec, dec, f"data/runs/{r}/bench/{p}.json")
                     for r, p, w, c, out, dec in POINTS])
    create_cost_tables(con, PRICES if prices is None else prices,
                       {"compare_user_tok_s": speed, "workloads": by_workload})
    for mart in MARTS:
        con.execute(f"create table {mart} as {derive.model_sql(mart)}")
    return con



def test_points_are_placed_per_gpu_of_their_runs_set():
    con = build()
    placed = {(r["run_id"], r["point_id"]): r for r in rows_of(con, "select * from pareto_points")}
    assert {r for r, _ in placed} == {"a-run", "b-run", "c-run"}     # not the earlier, not the CPU run
    assert ("a-run", "w__c32") not in placed                        # no throughput
    assert placed[("a-run", "w__c04")]["gpus"] == 8
    assert placed[("a-run", "w__c04")]["output_tok_s_per_gpu"] == pytest.approx(50.0)
    assert placed[("b-run", "w__c02")]["gpus"] == 4
    assert placed[("b-run", "w__c02")]["output_tok_s_per_gpu"] == pytest.approx(15.0)
    assert placed[("a-run", "w__c01")]["setup"] == "ma | tp8 | vllm | img:1"


def test_frontier_membership():
    con = build()
    on = {(r["run_id"], r["point_id"]) for r in rows_of(con, "select * from pareto_points where on_frontier")}
    off = {(r["run_id"], r["point_id"]) for r in rows_of(con, "select * from pareto_points where not on_frontier")}
    assert off == {("a-run", "w__c08")}     # (60, 40 per GPU) is beaten by (80, 50 per GPU)
    assert ("a-run", "w__c16") in on and ("a-run", "w__c01") in on and ("a-run", "w__c04") in on


def test_the_compared_speed_is_read_only_where_the_frontier_brackets_it():
    con = build(speed=90.0)
    got = {(r["setup"].split(" |")[0], r["workload"]): r for r in rows_of(con, "select * from pareto_compare")}
    a = got[("ma", "w")]
    # between (80 tok/s per user, 50 per GPU) and (100, 10): 50 + (10 - 50) * (90 - 80) / (100 - 80)
    assert a["bracketed"] and a["reach"] == "bracketed"
    assert a["output_tok_s_per_gpu"] == pytest.approx(30.0)
    assert (a["lower_point_id"], a["upper_point_id"]) == ("w__c04", "w__c01")
    b = got[("mb", "w")]                    # every point faster per user: not bracketed
    assert not b["bracketed"] and b["reach"] == "above" and b["output_tok_s_per_gpu"] is None
    assert b["frontier_min_decode_tok_s_per_user"] == pytest.approx(120.0)
    c = got[("mc", "w")]                    # a point measured at the speed gives its own figure
    assert c["bracketed"] and c["output_tok_s_per_gpu"] == pytest.approx(15.0)
    v = got[("mc", "v")]                    # every point slower per user: not reached
    assert not v["bracketed"] and v["reach"] == "below" and v["output_tok_s_per_gpu"] is None


def test_a_workload_that_names_its_own_speed_is_read_at_it():
    con = build(speed=90.0, by_workload={"v": 50})
    got = {(r["setup"].split(" |")[0], r["workload"]): r for r in rows_of(con, "select * from pareto_compare")}
    v = got[("mc", "v")]                    # its one point is at 50 tok/s per user: its own figure
    assert (v["compare_user_tok_s"], v["compare_user_tok_s_setting"]) == (50.0, "pareto.workloads.v")
    assert v["bracketed"] and v["output_tok_s_per_gpu"] == pytest.approx(10.0)
    w = got[("mc", "w")]                    # the others keep the default
    assert (w["compare_user_tok_s"], w["compare_user_tok_s_setting"]) == (90.0, "pareto.compare_user_tok_s")
    assert w["output_tok_s_per_gpu"] == pytest.approx(15.0)
    only_named = build(speed=None, by_workload={"v": 50})
    assert {r["workload"]: r["reach"] for r in rows_of(only_named, "select * from pareto_compare")
            if r["setup"].startswith("mc")} == {"v": "bracketed", "w": None}


def test_without_a_speed_nothing_is_compared():
    con = build(speed=None)
    assert {(r["reach"], r["output_tok_s_per_gpu"]) for r in rows_of(con, "select * from pareto_compare")} \
        == {(None, None)}


def test_cost_per_million_output_tokens_by_hand():
    con = build()
    got = {(r["run_id"], r["point_id"], r["price_set"]): r for r in rows_of(con, "select * from point_cost")}
    assert len(got) == 2 * 9
    # 4 GPUs x 4.5 $/h / (60 tok/s x 3600 s/h) x 1e6 = 18 / 216000 x 1e6
    assert got[("b-run", "w__c02", "dear")]["usd_per_million_output_tokens"] == pytest.approx(83.3333333)
    # 8 GPUs x 2 $/h / (400 tok/s x 3600) x 1e6
    assert got[("a-run", "w__c04", "cheap")]["usd_per_million_output_tokens"] == pytest.approx(11.1111111)
    assert got[("a-run", "w__c04", "cheap")]["price_source"] == "S19"


def test_the_schema_checks_hold_on_the_constructed_points():
    from stages.core.catalogue import SQL_DIR
    schema = yaml.safe_load((SQL_DIR / "marts" / "schema.yaml").read_text())
    con = build()
    for mart in MARTS:
        for name, sql in schema.get(mart, {}).get("checks", {}).items():
            assert con.execute(sql).fetchall() == [], (mart, name)


@pytest.mark.parametrize("prices, pareto, message", [
    ({"x": {"usd_per_gpu_hour": 0, "source": "S19"}}, None, "prices.x.usd_per_gpu_hour"),
    ({"x": {"usd_per_gpu_hour": 2.0}}, None, "prices.x.source"),
    ({"x": {"usd_per_gpu_hour": 2.0, "source": "a link"}}, None, "prices.x.source"),
    (None, {"compare_user_tok_s": "fast"}, "pareto.compare_user_tok_s"),
    (None, {"compare_user_tok_s": 30, "workloads": {"doc": -1}}, "pareto.workloads.doc"),
    (None, {"workloads": [40]}, "pareto.workloads must map"),
])
def test_bad_settings_are_refused(prices, pareto, message):
    with pytest.raises(CampaignError, match=message):
        create_cost_tables(duckdb.connect(), prices, pareto)


def test_price_sets_cite_sources_the_site_lists():
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    params = yaml.safe_load((root / "params.yaml").read_text())
    ids = {s["id"] for s in yaml.safe_load((root / "site" / "sources.yaml").read_text())}
    assert params["prices"] and all(p["source"] in ids for p in params["prices"].values())

"""Service level objectives, from constructed requests: each point's share of requests meeting
the targets and its goodput (point_slo), and per launch and workload the most users that met them
(slo_concurrency), interpolated only between two measured levels that bracket it. Every expected
figure below is worked out by hand from the requests."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from helpers.derive_rows import RULES, _point, _request, _run, make_warehouse, query, raw_path
from stages.core.config import CampaignError, derive_settings, load_params
from stages.derive import params_tables
from stages.derive import stage as derive
from stages.render import inputs

RUN = "m__tp4__8k__vllm__1101-000000"
WORKLOADS = {name: {"prompt_tokens": 1000, "output_tokens": 100, "concurrency": [1, 2, 4]}
             for name in ("w", "v", "u", "free")}
# w: p90 within 2 s to the first token and 50 ms a token; v: the first token only; u: tokens only
SLO = {"w": {"percentile": 90, "ttft_s": 2.0, "tpot_ms": 50},
       "v": {"percentile": 99, "ttft_s": 1.0},
       "u": {"percentile": 50, "tpot_ms": 30}}


def _timed_point(point_id: str, workload: str, users: int, requests: list[tuple], duration_s: float) -> tuple:
    """A point and its requests: each (ttft s, tpot ms, output tokens, error)."""
    rows = [_request(RUN, point_id, i, 1000, out, ttft, tpot, err)
            for i, (ttft, tpot, out, err) in enumerate(requests)]
    failed = sum(1 for *_, err in requests if err)
    point = {**_point(RUN, point_id, workload, users, len(requests), len(requests) - failed, failed, 100.0),
             "duration_s": duration_s}
    return point, rows


POINTS = [
    # w at 1 user: four within both targets, and one answered in 0.01 s, 100,000 prompt tokens a
    # second: served from the prefix cache, so not judged. 4 of 4 met: 100 %, 4 / 8 s = 0.5 req/s.
    _timed_point("w__c01", "w", 1, [(0.5, 20.0, 100, "")] * 4 + [(0.01, 20.0, 100, "")], 8.0),
    # w at 2 users: six within, one first token too slow (3 s), one token rate too slow (60 ms):
    # 6 of 8 met, 75 % < 90: missed; 6 / 12 s = 0.5 req/s.
    _timed_point("w__c02", "w", 2, [(0.5, 20.0, 100, "")] * 6 + [(3.0, 20.0, 100, ""),
                                                                 (0.5, 60.0, 100, "")], 12.0),
    # w at 4 users: 2 of 4 met (50 %); measured above the first miss, it changes nothing.
    _timed_point("w__c04", "w", 4, [(0.5, 20.0, 100, "")] * 2 + [(3.0, 20.0, 100, "")] * 2, 10.0),
    # v at 1 and 2 users: all within 1 s to the first token (tokens have no target there; one
    # request of one output token has no TPOT and is judged by its first token alone).
    _timed_point("v__c01", "v", 1, [(0.4, 90.0, 100, "")] * 2, 4.0),
    _timed_point("v__c02", "v", 2, [(0.6, 90.0, 100, "")] * 3 + [(0.6, None, 1, "")], 5.0),
    # u at 1 user: one request failed (judged, missed) and one too slow: 0 of 2.
    _timed_point("u__c01", "u", 1, [(0.0, None, 0, "Connection reset by peer"), (0.5, 40.0, 100, "")], 2.0),
    # free has no objectives: no point_slo row.
    _timed_point("free__c01", "free", 1, [(0.5, 20.0, 100, "")] * 2, 2.0),
]


def rows() -> dict:
    return {
        "raw_runs": ({}, [_run(RUN, "m", "2026-11-01T00:00:00Z")]),
        "raw_launch_out": ({}, [{"run_id": RUN, "key": "status", "value": "ready",
                                 "source_file": raw_path(RUN, "launch.out"), "source_line": 1}]),
        "raw_gates": ({}, [{"run_id": RUN, "gate": "niah", "score": 1.0,
                            "source_file": raw_path(RUN, "niah.log"), "source_line": 4}]),
        "raw_bench_points": ({}, [p for p, _ in POINTS]),
        "raw_bench_requests": ({}, [r for _, rs in POINTS for r in rs]),
    }


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("slo")
    warehouse = make_warehouse(tmp / "warehouse.duckdb", rows())
    target = tmp / "out"
    derive.run(warehouse=warehouse, campaign_db=target / "campaign.duckdb",
               derived_dir=target / "derived", metrics_file=target / "metrics.json",
               rules=RULES, workloads=WORKLOADS, slo=SLO)
    return target


def test_each_point_counts_the_requests_that_met_the_targets_and_its_goodput(out):
    got = {r["point_id"]: r for r in query(out, "select * from point_slo")}
    assert set(got) == {"w__c01", "w__c02", "w__c04", "v__c01", "v__c02", "u__c01"}   # not free
    expect = {  # judged, met, share %, goodput req/s, meets
        "w__c01": (4, 4, 100.0, 0.5, True),
        "w__c02": (8, 6, 75.0, 0.5, False),
        "w__c04": (4, 2, 50.0, 0.2, False),
        "v__c01": (2, 2, 100.0, 0.5, True),
        "v__c02": (4, 4, 100.0, 0.8, True),
        "u__c01": (2, 0, 0.0, 0.0, False),
    }
    for point_id, (judged, met, share, goodput, meets) in expect.items():
        r = got[point_id]
        assert (r["slo_judged_requests"], r["slo_met_requests"], r["meets_slo"]) == (judged, met, meets), point_id
        assert r["slo_share_pct"] == pytest.approx(share) and r["goodput_req_s"] == pytest.approx(goodput)
    assert (got["v__c01"]["tpot_target_ms"], got["u__c01"]["ttft_target_s"]) == (None, None)


def test_the_most_users_is_interpolated_only_where_two_levels_bracket_it(out):
    got = {r["workload"]: r for r in query(out, "select * from slo_concurrency")}
    w = got["w"]
    # met at 1 user (100 %), missed at 2 (75 %): 1 + (100 - 90) * (2 - 1) / (100 - 75) = 1.4
    assert (w["met_concurrency"], w["failed_concurrency"], w["bracket"]) == (1, 2, "interpolated")
    assert (w["met_share_pct"], w["failed_share_pct"]) == (pytest.approx(100.0), pytest.approx(75.0))
    assert w["slo_concurrency"] == pytest.approx(1.4)
    assert w["goodput_max_req_s"] == pytest.approx(0.5) and w["levels"] == 3
    # every level met: the highest measured, a lower bound, not interpolated
    v = got["v"]
    assert (v["met_concurrency"], v["failed_concurrency"], v["slo_concurrency"], v["bracket"]) == \
        (2, None, 2.0, "highest measured met")
    # none met: no figure
    u = got["u"]
    assert (u["met_concurrency"], u["slo_concurrency"], u["bracket"]) == (None, None, "none met")
    assert "free" not in got


def test_the_share_fact_lists_each_request_and_recomputes_from_them(out):
    con = duckdb.connect(str(out / "campaign.duckdb"), read_only=True)
    try:
        params = {"run_id": RUN, "workload": "w", "concurrency": 2}
        statistic, listed = inputs.input_rows(con, "point_slo_share_pct", params)
        _, met = inputs.input_rows(con, "point_slo_met_requests", params)
        first = inputs.input_rows(con, "point_slo_share_pct", {**params, "concurrency": 1})[1]
    finally:
        con.close()
    assert statistic == "share_pct" and len(listed) == 8
    assert inputs.recompute("share_pct", listed) == pytest.approx(75.0)
    assert inputs.recompute("count", met) == 6
    assert [r["reason"] for r in listed if r["value"] == 0] == [
        "first token over its target", "tokens slower than their target"]
    # the request served from the prefix cache is listed, not used
    assert [(r["used"], r["reason"]) for r in first].count((False, "prefix_cache")) == 1
    assert inputs.recompute("share_pct", first) == pytest.approx(100.0)


def test_p99_sits_beside_median_and_p90_and_recomputes_from_the_requests(out):
    r = query(out, "select * from bench_points where point_id = 'w__c02'")[0]
    # TTFTs: six of 0.5 s and one of 3.0 s, and 0.5 s again: sorted, 7 x 0.5 then 3.0;
    # p99 = 0.5 + (3.0 - 0.5) * (0.99 * 7 - 6) = 0.5 + 2.5 * 0.93
    assert r["ttft_p99_s"] == pytest.approx(0.5 + 2.5 * 0.93)
    assert r["ttft_median_s"] <= r["ttft_p90_s"] <= r["ttft_p99_s"]
    # TPOTs: seven of 20 ms and one of 60 ms: p90 = 20 + 40 * (0.9 * 7 - 6), p99 = 20 + 40 * 0.93
    assert r["tpot_p90_ms"] == pytest.approx(20 + 40 * 0.3)
    assert r["tpot_p99_ms"] == pytest.approx(20 + 40 * 0.93)
    assert inputs.recompute("p99", [{"value": v, "used": True} for v in [0.5] * 7 + [3.0]]) == \
        pytest.approx(r["ttft_p99_s"])


@pytest.mark.parametrize("entry", [
    {"percentile": 0, "ttft_s": 1}, {"percentile": 101, "ttft_s": 1}, {"percentile": 90},
    {"percentile": 90, "ttft_s": -1}, {"percentile": 90, "ttft_s": "1"}, {"percentile": 90, "e2e_s": 1},
    {"ttft_s": 1}])
def test_an_objective_needs_a_percentile_and_a_positive_target(entry):
    with pytest.raises(CampaignError, match=r"slo\.h200x8\.w"):
        params_tables.slo_rows({"w": entry}, "h200x8")


def test_params_give_each_profile_its_objectives():
    params = load_params(Path(__file__).resolve().parent.parent, check=False)
    settings = derive_settings(params)
    assert settings["slo"] == params["slo"][params["profile"]]
    for name, profile in settings["profiles"].items():
        rows_ = params_tables.slo_rows(profile["slo"], name)
        # every objective names a sweep workload of its own profile
        assert {r[1] for r in rows_} <= set(params["workloads"][name])

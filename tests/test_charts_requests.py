"""The charts of single requests: the latency CDF (each point's requests ranked by their first
token) and the request timeline of one point (sent, first token, last token)."""
from __future__ import annotations

import pandas as pd
import pytest

from stages.render import charts, charts_requests


def requests() -> pd.DataFrame:
    rows = []
    for run, spec, provisional in (("a__tp4__8k__vllm__1101-000000", "a-tp4", False),
                                   ("b__tp8__8k__vllm__1101-010000", "b-tp8", True)):
        for users, ttfts in ((1, [0.3, 0.1]), (4, [0.9, 0.2, 0.5, 0.4])):
            rows += [{"run_id": run, "series": spec, "workload": "w", "concurrency": users,
                      "provisional": provisional, "request_idx": i, "ttft_s": t, "tpot_ms": 10.0}
                     for i, t in enumerate(ttfts)]
    return pd.DataFrame(rows)


def test_cdf_ranks_each_points_requests_from_its_own_count():
    df = charts_requests.cdf_rows(requests())
    four = df[(df["run_id"].str.startswith("a")) & (df["concurrency"] == 4)]
    # 0.2, 0.4, 0.5, 0.9: the i-th fastest of four at i / 4
    assert list(zip(four["ttft_s"], four["share"])) == [(0.2, 0.25), (0.4, 0.5), (0.5, 0.75), (0.9, 1.0)]
    one = df[(df["run_id"].str.startswith("b")) & (df["concurrency"] == 1)]
    assert list(one["share"]) == [0.5, 1.0] and set(one["run_kind"]) == {"provisional"}
    assert df["line"].nunique() == 4


def test_cdf_chart_is_faceted_by_workload_coloured_by_spec_and_registered():
    spec = charts.spec("latency_cdf_chart", requests(), ["b-tp8", "a-tp4"]).copy()
    assert spec["facet"]["field"] == "workload"
    colour = spec["spec"]["layer"][0]["encoding"]["color"]["scale"]
    assert colour["domain"] == ["b-tp8", "a-tp4"]     # the campaign-wide order of specs
    assert spec["spec"]["layer"][0]["mark"]["interpolate"] == "step-after"
    assert charts.CHART_ROWS["latency_cdf_chart"] == "model_request_latency"


def timeline() -> pd.DataFrame:
    return pd.DataFrame([
        {"run_id": "r", "series": "s", "point_id": "w__c02", "request_idx": 1, "ok": True,
         "sent_s": 0.5, "first_token_s": 1.0, "last_token_s": 3.0, "output_tokens": 10},
        {"run_id": "r", "series": "s", "point_id": "w__c02", "request_idx": 0, "ok": True,
         "sent_s": 0.0, "first_token_s": 0.2, "last_token_s": 2.0, "output_tokens": 10},
        {"run_id": "r", "series": "s", "point_id": "w__c02", "request_idx": 2, "ok": False,
         "sent_s": 2.0, "first_token_s": None, "last_token_s": None, "output_tokens": 0},
    ])


def test_timeline_draws_waiting_then_decoding_for_each_request_in_the_order_sent():
    df = charts_requests.timeline_rows(timeline())
    got = sorted(zip(df["order"], df["request_idx"], df["phase"], df["begin_s"], df["end_s"]))
    assert got == [(1, 0, "decoding", 0.2, 2.0), (1, 0, "waiting and prefill", 0.0, 0.2),
                   (2, 1, "decoding", 1.0, 3.0), (2, 1, "waiting and prefill", 0.5, 1.0)]
    # the failed request (no first token) has no bar, but keeps its place in the order
    assert 3 not in set(df["order"])


@pytest.mark.parametrize("n, height", [(3, 120), (40, 280), (200, 420)])
def test_timeline_height_follows_the_requests_within_bounds(n, height):
    rows = pd.DataFrame([{"run_id": "r", "series": "s", "point_id": "p", "request_idx": i, "ok": True,
                          "sent_s": float(i), "first_token_s": i + 0.5, "last_token_s": i + 1.0}
                         for i in range(n)])
    spec = charts.spec("request_timeline_chart", rows)
    assert spec["height"] == height
    assert "Point r, p." in spec["title"]["subtitle"][0]


def test_timelines_of_two_points_share_a_layout_and_each_is_the_chart_its_function_draws():
    import json

    first = timeline()
    second = timeline().assign(run_id="q", series="t", point_id="w__c04", sent_s=lambda d: d["sent_s"] * 2)
    domain = ["s", "t"]
    specs = []
    for rows in (first, second):
        drawn = charts_requests.request_timeline_chart(rows.copy(), domain).to_dict(validate=False)
        (key, values), = drawn.pop("datasets").items()
        drawn = {**drawn, "data": {"name": charts.ROWS}, "datasets": {charts.ROWS: values}}
        laid_out = charts.spec("request_timeline_chart", rows.copy(), domain)
        assert json.loads(json.dumps(laid_out)) == json.loads(json.dumps(drawn, default=str))
        specs.append(laid_out)
    # only the note, the run spec's colour and the rows differ: one layout served both
    assert specs[0]["title"]["subtitle"][0] == "Point r, w__c02." and specs[1]["title"]["subtitle"][0] == "Point q, w__c04."
    assert specs[0]["encoding"]["color"]["scale"]["range"] != specs[1]["encoding"]["color"]["scale"]["range"]
    before = charts._layout_json.cache_info().currsize
    charts.spec("request_timeline_chart", second.assign(point_id="w__c08").copy(), domain)
    assert charts._layout_json.cache_info().currsize == before

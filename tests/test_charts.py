"""The scaling charts: Altair charts with the encodings and markings the articles rely on."""
from __future__ import annotations

import json

import altair as alt
import pandas as pd
import pytest

from stages.render import chart_notes, chart_parts, charts, charts_ramp


def points() -> pd.DataFrame:
    rows = []
    for run_id, series, provisional in (("run-a", "tiny-seqs4", True), ("run-b", "tiny-seqs16", False)):
        for c in (1, 2, 4, 8):
            rows.append(dict(run_id=run_id, series=series, workload="long", concurrency=c,
                             sent=2 * c, completed=2 * c - (c == 8), ttft_median_s=0.5 * c,
                             ttft_p90_s=0.7 * c, decode_tok_s_per_user=100.0 / c,
                             output_tok_s=80.0 * min(c, 4), capacity_limited=c > 4,
                             provisional=provisional))
    return pd.DataFrame(rows)


def layers(chart: alt.TopLevelMixin) -> list[dict]:
    spec = chart.to_dict()
    assert "facet" in spec, "charts are faceted by workload"
    assert spec["facet"]["field"] == "workload"
    return spec["spec"]["layer"]


def filtered(layer_list: list[dict], expr: str) -> list[dict]:
    return [l for l in layer_list if any(t.get("filter") == expr for t in l.get("transform", []))]


@pytest.mark.parametrize("name,field", [
    ("ttft_chart", "ttft_s"),
    ("decode_chart", "decode_tok_s_per_user"),
    ("throughput_chart", "output_tok_s"),
    ("completed_chart", "completed"),
])
def test_chart_encodes_concurrency_value_and_spec_colour(name, field):
    chart = charts.CHARTS[name](points(), ["other", "tiny-seqs16", "tiny-seqs4"])
    assert isinstance(chart, alt.TopLevelMixin)
    ls = layers(chart)
    line = next(l for l in ls if l["mark"]["type"] == "line")
    enc = line["encoding"]
    assert enc["x"]["field"] == "concurrency"
    assert enc["x"]["scale"] == {"type": "log", "base": 2, "padding": 12}
    assert enc["y"]["field"] == field
    assert enc["color"]["field"] == "series"
    # the campaign-wide domain fixes each spec's colour; the chart names only the specs it draws
    assert enc["color"]["scale"]["domain"] == ["tiny-seqs16", "tiny-seqs4"]
    assert enc["color"]["scale"]["range"] == chart_parts.PALETTE[1:3]
    assert enc["strokeDash"]["field"] == "run_kind"
    assert "run_id" in [t["field"] for t in enc["tooltip"]]


def test_ttft_is_log_scale_with_median_and_p90():
    chart = charts.ttft_chart(points())
    ls = layers(chart)
    assert ls[0]["encoding"]["y"]["scale"]["type"] == "log"
    values = chart.to_dict()["datasets"]
    rows = next(iter(values.values()))
    assert {r["stat"] for r in rows} == {"median", "p90"}
    assert len(rows) == 2 * len(points())


def test_a_point_whose_ttft_rests_on_no_request_is_left_out_of_the_ttft_chart():
    df = points().assign(ttft_requests=2)
    cached = (df["run_id"] == "run-b") & (df["concurrency"] == 8)
    df.loc[cached, "ttft_requests"] = 0
    rows = next(iter(charts.ttft_chart(df).to_dict()["datasets"].values()))
    assert len(rows) == 2 * (len(df) - 1)
    assert not any(r["run_id"] == "run-b" and r["concurrency"] == 8 for r in rows)
    assert chart_notes.NO_TTFT_NOTE in charts.ttft_chart(df).to_dict()["title"]["subtitle"]
    assert chart_notes.NO_TTFT_NOTE not in charts.ttft_chart(points()).to_dict()["title"]["subtitle"]
    # the other charts keep the point: its TPOT and throughput do not rest on the first token
    decode = next(iter(charts.decode_chart(df).to_dict()["datasets"].values()))
    assert any(r["run_id"] == "run-b" and r["concurrency"] == 8 for r in decode)


def test_the_decode_chart_says_where_its_tpot_came_from_and_which_points_it_leaves_out():
    df = points().assign(figures_from="requests", tpot_from="latencies")
    assert chart_notes.TPOT_NOTES["itls"][1] not in charts.decode_chart(df).to_dict()["title"]["subtitle"]
    df.loc[df["run_id"] == "run-a", "tpot_from"] = "itls"
    df.loc[(df["run_id"] == "run-b") & (df["concurrency"] == 8), ["tpot_from", "decode_tok_s_per_user"]] = [None, None]
    spec = charts.decode_chart(df).to_dict()
    subtitle = spec["title"]["subtitle"]
    assert chart_notes.TPOT_NOTES["itls"][1] in subtitle and chart_notes.NO_DECODE_NOTE in subtitle
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == len(df) - 1
    assert {r["note"].split(", ")[-1] for r in rows if r["run_id"] == "run-a"} == {"TPOT from itls"}
    assert all("TPOT from" not in r["note"] for r in rows if r["run_id"] == "run-b")
    # the tool's summary as the only source of a point's figures is said once, as before
    whole = points().assign(figures_from="tool summary", tpot_from="tool summary")
    subtitle = charts.decode_chart(whole).to_dict()["title"]["subtitle"]
    assert chart_notes.SUMMARY_NOTE in subtitle and chart_notes.TPOT_NOTES["tool summary"][1] not in subtitle


def test_capacity_limited_points_are_grey_and_hatched():
    ls = layers(charts.decode_chart(points()))
    limited = filtered(ls, "datum.capacity_limited")
    marks = {l["mark"]["type"]: l["mark"] for l in limited}
    assert marks["square"]["color"] == chart_parts.GREY
    assert marks["point"]["shape"] == chart_parts.HATCH_SHAPE
    assert "color" not in limited[0].get("encoding", {}), "grey overrides the spec colour"
    subtitle = " ".join(charts.decode_chart(points()).to_dict()["title"]["subtitle"])
    assert "capacity-limited" in subtitle and "provisional" in subtitle


def test_provisional_runs_get_hollow_markers_and_the_word_in_tooltips():
    chart = charts.throughput_chart(points())
    ls = layers(chart)
    hollow = filtered(ls, "!datum.capacity_limited && datum.provisional")
    assert hollow and hollow[0]["mark"]["filled"] is False
    solid = filtered(ls, "!datum.capacity_limited && !datum.provisional")
    assert solid and solid[0]["mark"]["filled"] is True
    rows = next(iter(chart.to_dict()["datasets"].values()))
    notes = {r["run_id"]: r["note"] for r in rows if r["concurrency"] == 8}
    assert notes == {"run-a": "provisional, capacity-limited", "run-b": "capacity-limited"}


def test_completed_chart_shows_sent_as_ticks():
    ls = layers(charts.completed_chart(points()))
    tick = next(l for l in ls if l["mark"]["type"] == "tick")
    assert tick["encoding"]["y"]["field"] == "sent"


def test_missing_columns_are_refused():
    with pytest.raises(ValueError, match="series"):
        charts.ttft_chart(points().drop(columns=["series"]))


def test_unknown_chart_name():
    with pytest.raises(KeyError, match="unknown chart"):
        charts.chart_by_name("pie_chart")


@pytest.mark.parametrize("workloads,columns", [(1, 1), (2, 2), (3, 3), (5, 3)])
def test_facets_share_the_article_width(workloads, columns):
    cols, width = chart_parts.facet_layout(workloads)
    assert cols == columns
    used = chart_parts.Y_AXIS_ALLOWANCE + cols * width + (cols - 1) * chart_parts.FACET_SPACING
    assert chart_parts.CHART_WIDTH - cols < used <= chart_parts.CHART_WIDTH


def test_chart_width_and_wrapping_follow_the_workloads():
    df = pd.concat([points().assign(workload=w) for w in ("long", "chat", "agent", "rag")])
    spec = charts.decode_chart(df).to_dict()
    assert spec["columns"] == chart_parts.MAX_FACET_COLUMNS
    assert spec["spec"]["width"] == chart_parts.facet_layout(4)[1]
    assert spec["config"]["legend"]["orient"] == "bottom"


def ramp_turns() -> pd.DataFrame:
    rows = []
    for run_id, series, provisional in (("run-a", "tiny-seqs4", True), ("run-b", "tiny-seqs16", False)):
        for turn in (1, 2, 3):
            rows.append(dict(run_id=run_id, series=series, workload="ramp", turn=turn, sessions=2,
                             context_tokens=1000 * turn, longest_wait_s=0.1 * turn if turn < 3 or provisional else None,
                             needle_found=2 if turn == 1 else 1, cache_hit_pct=80.0, provisional=provisional))
    return pd.DataFrame(rows)


def test_ramp_chart_plots_the_wait_against_the_conversation_length():
    df = ramp_turns()
    spec = charts_ramp.ramp_chart(df, ["tiny-seqs16", "tiny-seqs4"]).to_dict()
    line, measured, provisional = spec["layer"]
    assert line["encoding"]["x"]["field"] == "context_tokens"
    assert line["encoding"]["y"]["field"] == "longest_wait_s"
    assert line["encoding"]["color"]["scale"]["domain"] == ["tiny-seqs16", "tiny-seqs4"]
    assert measured["mark"]["filled"] and not provisional["mark"]["filled"]
    assert measured["encoding"]["shape"]["scale"]["range"] == ["circle", "cross"]
    data = charts_ramp.prepare_ramp(df)
    # a turn without a wait (every request failed) is left out, not drawn at zero
    assert len(data) == 5
    assert list(data["needle"]) == ["found in every session", "missed", "missed"] + ["found in every session", "missed"]


def test_ramp_chart_refuses_rows_without_its_columns():
    with pytest.raises(ValueError, match="ramp turns lack columns: needle_found"):
        charts_ramp.ramp_chart(ramp_turns().drop(columns=["needle_found"]))


def test_capacity_limits_are_drawn_as_rules_where_they_fall_in_range():
    rows = pd.DataFrame([
        {"run_id": "r", "series": "s", "workload": "w", "concurrency": c, "capacity_limited": c > 16,
         "provisional": False, "ttft_median_s": 0.1 * c, "ttft_p90_s": 0.2 * c, "seq_cap": 16,
         "fit_by_kv": 2546}
        for c in (1, 8, 64)])
    spec = charts.ttft_chart(rows).to_dict()
    rules = [layer for layer in spec["spec"]["layer"] if layer.get("mark", {}).get("type") == "rule"]
    assert [r["encoding"]["x"]["field"] for r in rules] == ["cap_users"]   # the KV fit is off the axis
    data = next(iter(spec["datasets"].values()))
    assert {d["cap_users"] for d in data} == {16} and all(d["kv_users"] is None for d in data)
    assert "Dashed rule: the sequence cap" in " ".join(spec["title"]["subtitle"])


def _dataset_named(spec: dict, name: str) -> dict:
    """spec with its one dataset renamed `name` (Altair names it by a digest of its rows)."""
    spec = dict(spec)
    (key, values), = spec.pop("datasets").items()
    assert spec["data"] == {"name": key}
    return {**spec, "data": {"name": name}, "datasets": {name: values}}


@pytest.mark.parametrize("name", sorted(charts.LAYOUTS))
def test_a_shared_layout_gives_the_spec_the_chart_function_draws(name):
    rows = points()
    rows.loc[0, "capacity_limited"] = True
    drawn = _dataset_named(charts.chart_by_name(name)(rows.copy(), ["tiny-seqs16", "tiny-seqs4"])
                           .to_dict(validate=False), charts.ROWS)
    first = charts.spec(name, rows.copy(), ["tiny-seqs16", "tiny-seqs4"])
    assert json.loads(json.dumps(first)) == json.loads(json.dumps(drawn, default=str))
    # another model's rows of the same shape reuse the layout: only the data differs
    other = rows.assign(ttft_median_s=rows["ttft_median_s"] * 2, decode_tok_s_per_user=7.0, completed=1)
    again = charts.spec(name, other, ["tiny-seqs16", "tiny-seqs4"])
    assert {k: v for k, v in again.items() if k != "datasets"} == \
        {k: v for k, v in first.items() if k != "datasets"}
    assert again["datasets"] != first["datasets"]


def node_points() -> pd.DataFrame:
    """One spec's points over the node's workloads, named so that their alphabetical order is not
    their prompt-length order; throughput an order of magnitude apart between the panels."""
    lengths = {"doc-1m": 1_000_000, "doc-256k": 256_000, "doc-512k": 512_000, "short-1k": 1024}
    return pd.DataFrame([
        {"run_id": "r", "series": "s", "workload": w, "concurrency": c, "prompt_tokens": n,
         "output_tokens": 512, "capacity_limited": False, "provisional": False,
         "ttft_median_s": n / 1e4, "ttft_p90_s": n / 9e3, "output_tok_s": 5e8 / n * c,
         "decode_tok_s_per_user": 50.0, "sent": 4, "completed": 4,
         "seq_cap": 16, "fit_by_kv": 2_600_000 // n}
        for w, n in lengths.items() for c in ((1, 2, 4) if n < 1e6 else (1,))])


@pytest.mark.parametrize("name", sorted(charts.LAYOUTS))
def test_workload_panels_are_in_prompt_length_order(name):
    spec = charts.chart_by_name(name)(node_points()).to_dict()
    assert spec["facet"]["sort"] == {"field": "workload_rank", "op": "min"}
    data = next(iter(spec["datasets"].values()))
    ranks = {d["workload"]: d["workload_rank"] for d in data}
    assert sorted(ranks, key=ranks.get) == ["short-1k", "doc-256k", "doc-512k", "doc-1m"]
    # each panel its own x axis, so no axis hangs under an empty cell of the grid
    assert spec["resolve"]["axis"]["x"] == "independent"


def test_a_rank_the_rows_carry_wins_over_their_lengths():
    rows = node_points().assign(workload_rank=lambda d: d["workload"].map(
        {"doc-1m": 0, "doc-256k": 1, "doc-512k": 2, "short-1k": 3}))
    assert charts.prepare(rows).groupby("workload")["workload_rank"].first().to_dict() == \
        {"doc-1m": 0, "doc-256k": 1, "doc-512k": 2, "short-1k": 3}


def test_limits_are_drawn_in_every_panel_the_shared_axis_reaches():
    df = charts.prepare(node_points())
    kv = df.groupby("workload")["kv_users"].first().to_dict()
    # 1M: 2 sequences fit though only 1 user was measured there (the axis reaches 2 from the
    # other panels); 512K: 5 fit, within one doubling of the 4 users measured; 256K's 10 and
    # short-1k's 2,539 lie beyond the axis, as does the cap of 16
    assert kv["doc-1m"] == 2 and kv["doc-512k"] == 5
    assert pd.isna(kv["doc-256k"]) and pd.isna(kv["short-1k"])
    assert df["cap_users"].isna().all()
    assert charts.prepare(node_points().assign(seq_cap=8))["cap_users"].eq(8).all()


def test_panels_an_order_of_magnitude_apart_get_their_own_y_scale():
    spec = charts.throughput_chart(node_points()).to_dict()
    assert spec["resolve"]["scale"]["y"] == "independent"
    assert any("its own y scale" in line for line in spec["title"]["subtitle"])
    close = node_points().assign(output_tok_s=100.0)
    spec = charts.throughput_chart(close).to_dict()
    assert spec["resolve"]["scale"]["y"] == "shared"
    assert not any("its own y scale" in line for line in spec["title"]["subtitle"])


def test_log_axes_label_one_two_and_five_only():
    spec = charts.ttft_chart(node_points()).to_dict()
    line = next(l for l in spec["spec"]["layer"] if l["mark"]["type"] == "line")
    assert line["encoding"]["y"]["axis"]["labelExpr"] == chart_parts.LOG_LABELS
    assert "indexof([1, 2, 5]" in chart_parts.LOG_LABELS

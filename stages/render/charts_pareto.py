"""The Pareto chart, `pareto_chart`: for one workload, every benchmark point of the setups a Part
compares (pareto_points rows, with `compare_user_tok_s`), output tokens/s per GPU against decode
speed per user. One colour per setup (model, layout, engine, image); the setup's frontier drawn as
a line through its frontier points in order of decode speed; points off the frontier hollow;
capacity-limited points as squares. A dotted vertical rule marks the speed the Part compares at.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from stages.render import charts
from stages.render.chart_parts import _checked, color_scale, series_colors, single_panel

PARETO_REQUIRED = ["run_id", "point_id", "workload", "concurrency", "setup", "gpus",
                   "output_tok_s_per_gpu", "decode_tok_s_per_user", "on_frontier",
                   "capacity_limited", "provisional", "compare_user_tok_s"]
PARETO_HEIGHT = 300
PARETO_NOTE = [
    "One colour per setup, the same on every page; a line joins the points on its frontier.",
    "Hollow markers: points another point of the setup beats on both axes. Squares: capacity-limited.",
    "Dotted rule: the decode speed per user the setups are compared at.",
]
POINT_KINDS = ["on the frontier", "off the frontier"]
LOAD_KINDS = ["within capacity", "capacity-limited"]


def prepare_pareto(points: pd.DataFrame) -> pd.DataFrame:
    """Pareto rows with the helper columns the chart encodes (frontier, load)."""
    df = _checked(points, PARETO_REQUIRED, "pareto points")
    df["frontier"] = [POINT_KINDS[0] if bool(f) else POINT_KINDS[1] for f in df["on_frontier"]]
    df["load"] = [LOAD_KINDS[1] if bool(c) else LOAD_KINDS[0] for c in df["capacity_limited"]]
    return df.sort_values(["setup", "decode_tok_s_per_user"]).reset_index(drop=True)


def pareto_chart(points: pd.DataFrame, color_domain: Sequence[str] | None = None) -> alt.LayerChart:
    """Output tokens/s per GPU against decode speed per user, each setup's Pareto frontier a line.

    Coloured by series, the colour each setup has on every page (rows without a `series` are
    coloured by setup, in the order given)."""
    df = prepare_pareto(points)
    if "series" not in df.columns:
        df["series"] = df["setup"]
    colors = series_colors(color_domain, df)
    colour = alt.Color("series:N", title="Setup", sort=[n for n, _ in colors], scale=color_scale(colors))
    x = alt.X("decode_tok_s_per_user:Q", title="Decode speed per user (tokens/s)",
              scale=alt.Scale(zero=False), axis=alt.Axis(tickCount=8, labelOverlap="greedy"))
    y = alt.Y("output_tok_s_per_gpu:Q", title="Output tokens/s per GPU")
    tooltip = [
        alt.Tooltip("setup:N"),
        alt.Tooltip("run_id:N", title="run"),
        alt.Tooltip("point_id:N", title="point"),
        alt.Tooltip("concurrency:Q", title="users"),
        alt.Tooltip("gpus:Q", title="GPUs"),
        alt.Tooltip("decode_tok_s_per_user:Q", title="tokens/s per user", format=".1f"),
        alt.Tooltip("output_tok_s_per_gpu:Q", title="tokens/s per GPU", format=".1f"),
        alt.Tooltip("frontier:N"),
        alt.Tooltip("load:N"),
    ]
    base = alt.Chart(df).encode(x=x, y=y, color=colour)
    line = (base.transform_filter(alt.datum.on_frontier)
            .mark_line(strokeWidth=1.8)
            .encode(order=alt.Order("decode_tok_s_per_user:Q"), detail="series:N"))
    marks = base.mark_point(size=60, opacity=1, strokeWidth=1.6).encode(
        shape=alt.Shape("load:N", title="Load",
                        scale=alt.Scale(domain=LOAD_KINDS, range=["circle", "square"])),
        fill=alt.condition(alt.datum.on_frontier, colour, alt.value("transparent")),
        tooltip=tooltip)
    layers = [line, marks]
    speed = df["compare_user_tok_s"].dropna()
    if not speed.empty:
        rule = pd.DataFrame({"compare_user_tok_s": [float(speed.iloc[0])]})
        layers.append(alt.Chart(rule).mark_rule(strokeDash=[2, 3], color="#404040").encode(
            x="compare_user_tok_s:Q",
            tooltip=[alt.Tooltip("compare_user_tok_s:Q", title="compared at (tokens/s per user)")]))
    workload = str(df["workload"].iloc[0]) if not df.empty else ""
    return single_panel(alt.layer(*layers), PARETO_HEIGHT,
                        f"Throughput per GPU against speed per user: {workload}", PARETO_NOTE)


charts.CHARTS["pareto_chart"] = pareto_chart
charts.CHART_ROWS["pareto_chart"] = "pareto_rows"

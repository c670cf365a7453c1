"""The ramp chart, `ramp_chart`: ramp_turns rows of the reported runs of a profile (row query
ramp_points), the longest wait for a first token at each turn against the conversation's length,
marked by whether every session found the needle from turn 1. Registered with the charts of
charts.py on import (chart_writer imports this module).
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from stages.render import charts
from stages.render.chart_parts import (_checked, _layers, _with_run_kind, color_scale, series_colors,
                                       single_panel)

RAMP_REQUIRED = ["run_id", "series", "workload", "turn", "sessions", "context_tokens", "longest_wait_s",
                 "needle_found", "provisional"]
NEEDLE_KINDS = ["found in every session", "missed"]
RAMP_NOTE = [
    "One line per run: each point is a turn, the conversation re-sent with one more step.",
    "Filled circles: every session's answer held the needle from turn 1; crosses: missed.",
    "Dashed lines and hollow markers: provisional runs.",
]
RAMP_HEIGHT = 240


def prepare_ramp(turns: pd.DataFrame) -> pd.DataFrame:
    """Ramp turns with the helper columns the chart encodes (needle, run_kind)."""
    df = _with_run_kind(_checked(turns, RAMP_REQUIRED, "ramp turns"))
    df["needle"] = [NEEDLE_KINDS[0] if f == s else NEEDLE_KINDS[1]
                    for f, s in zip(df["needle_found"], df["sessions"])]
    df["turn"] = df["turn"].astype(int)
    return df[df["longest_wait_s"].notna()]


def ramp_chart(turns: pd.DataFrame, color_domain: Sequence[str] | None = None) -> alt.LayerChart:
    """Longest wait for the first token at each turn of the ramp, against the conversation's length."""
    df = prepare_ramp(turns)
    shape = alt.Shape("needle:N", title="Needle", scale=alt.Scale(domain=NEEDLE_KINDS, range=["circle", "cross"]))
    tooltip = [
        alt.Tooltip("run_id:N", title="run"),
        alt.Tooltip("workload:N"),
        alt.Tooltip("turn:Q"),
        alt.Tooltip("context_tokens:Q", title="conversation (tokens)", format=","),
        alt.Tooltip("longest_wait_s:Q", title="longest wait (s)", format=".3f"),
        alt.Tooltip("needle_found:Q", title="needle found (sessions)"),
        alt.Tooltip("cache_hit_pct:Q", title="served from cache (%)", format=".1f"),
    ]
    x = alt.X("context_tokens:Q", title="Conversation length (tokens)", axis=alt.Axis(format="~s"))
    y = alt.Y("longest_wait_s:Q", title="Longest wait for the first token (s)")
    layers = _layers(y, color_scale(series_colors(color_domain, df)), tooltip, shape=shape, x=x,
                     capacity=False)
    return single_panel(alt.layer(*layers, data=df), RAMP_HEIGHT,
                        "The ramp: waiting for each turn of a growing conversation", RAMP_NOTE)


charts.CHARTS["ramp_chart"] = ramp_chart
charts.CHART_ROWS["ramp_chart"] = "ramp_points"

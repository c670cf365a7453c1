"""The engine's own /metrics through one benchmark point, beside the point's request timeline.

`metrics_series_chart` takes the samples of the point's /metrics series file (row query
model_metrics_series, from point_metrics_series), for a point whose sampling read it often enough
(point_metrics_summary.sampled_enough: a shorter point is said in words, not drawn): two panels on
one time axis, seconds since the point's first request was sent, from 0 to its last answer (the
reads before and after the requests are left off the axis): above, the requests the engine had
running and waiting at each read while the requests ran; below, the tokens it generated per
second over each interval between reads (the generation counter's change over the interval,
drawn across it: a rate is not a reading at one instant). A stall shows as requests running over
intervals without a generated token; a queue as waiting above zero.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from stages.render import charts
from stages.render.chart_parts import CHART_WIDTH, GREY, Y_AXIS_ALLOWANCE, _checked, series_colors

SERIES_REQUIRED = ["run_id", "series", "point_id", "sample_idx", "seconds", "in_requests", "running",
                   "waiting", "gen_tok_s", "rate_from_s", "requests_s"]
REQUEST_LINES = ["running", "waiting"]
PANEL_HEIGHT = 140


def series_rows(samples: pd.DataFrame) -> pd.DataFrame:
    """The samples in time order, as read (a failed scrape is not among them)."""
    df = _checked(samples, SERIES_REQUIRED, "samples")
    return df[df["seconds"].notna()].sort_values(["seconds", "sample_idx"], kind="stable").reset_index(drop=True)


def window_end_s(df: pd.DataFrame) -> float:
    """Where the time axis ends: when the point's last request was answered (requests_s), else
    at its last read."""
    ends = df["requests_s"].dropna()
    if len(ends):
        return float(ends.iloc[0])
    return float(df["seconds"].max()) if len(df) else 0.0


def request_reads(df: pd.DataFrame, end_s: float) -> pd.DataFrame:
    """The reads taken while the requests ran, one row per read and line (running, waiting)."""
    inside = df[df["in_requests"].astype(bool) & (df["seconds"] >= 0) & (df["seconds"] <= end_s)]
    return inside.melt(id_vars=["seconds", "sample_idx"], value_vars=REQUEST_LINES,
                       var_name="requests", value_name="count")


def rate_intervals(df: pd.DataFrame, end_s: float) -> pd.DataFrame:
    """One row per interval between reads with a generation rate, clipped to the requests' window
    (from_s to to_s): the part of each interval the axis shows."""
    rated = df[df["gen_tok_s"].notna() & df["rate_from_s"].notna()].copy()
    rated["from_s"] = rated["rate_from_s"].clip(lower=0.0, upper=end_s)
    rated["to_s"] = rated["seconds"].clip(lower=0.0, upper=end_s)
    return rated[rated["to_s"] > rated["from_s"]][["sample_idx", "from_s", "to_s", "gen_tok_s", "running"]]


def metrics_series_chart(samples: pd.DataFrame, color_domain: Sequence[str] | None = None
                         ) -> alt.VConcatChart:
    """One point's running and waiting requests at each read and generated tokens per second over
    each interval between reads, by the engine's own /metrics, on an axis from 0 to the point's
    last answer."""
    df = series_rows(samples)
    colors = series_colors(color_domain, df)
    colour = colors[0][1] if colors else GREY
    first = df.iloc[0] if len(df) else None
    what = f"{first['run_id']}, {first['point_id']}" if first is not None else ""
    width = CHART_WIDTH - Y_AXIS_ALLOWANCE
    end_s = window_end_s(df)
    x_scale = alt.Scale(domain=[0, end_s], nice=False, zero=True)
    x = alt.X("seconds:Q", title="Seconds from the first request sent", scale=x_scale)
    upper = alt.Chart(request_reads(df, end_s)).mark_line(point=True, interpolate="step-after").encode(
        x=x,
        y=alt.Y("count:Q", title="Requests"),
        color=alt.Color("requests:N", title="Requests", scale=alt.Scale(domain=REQUEST_LINES,
                                                                        range=[colour, GREY])),
        tooltip=[alt.Tooltip("seconds:Q", title="seconds", format=".1f"), alt.Tooltip("requests:N"),
                 alt.Tooltip("count:Q", title="requests")],
    ).properties(width=width, height=PANEL_HEIGHT)
    lower = alt.Chart(rate_intervals(df, end_s)).mark_rect(color=colour, opacity=0.55, stroke="white",
                                                           strokeWidth=1).encode(
        x=alt.X("from_s:Q", title="Seconds from the first request sent", scale=x_scale),
        x2="to_s:Q",
        y=alt.Y("gen_tok_s:Q", title="Generated tokens/s", scale=alt.Scale(zero=True)),
        y2=alt.datum(0),
        tooltip=[alt.Tooltip("from_s:Q", title="from (s)", format=".1f"),
                 alt.Tooltip("to_s:Q", title="to (s)", format=".1f"),
                 alt.Tooltip("gen_tok_s:Q", title="generated tokens/s", format=",.0f"),
                 alt.Tooltip("running:Q", title="running at the interval's end")],
    ).properties(width=width, height=PANEL_HEIGHT)
    return (
        alt.vconcat(upper, lower, spacing=12)
        .properties(title=alt.TitleParams(
            "The engine's own /metrics through one point",
            subtitle=[f"Point {what}.",
                      "Above: requests running and waiting at each read while the requests ran; below: "
                      "tokens generated per second over each interval between reads."],
            anchor="start"))
        .configure_legend(orient="bottom", direction="vertical")
    )


# Registered with the charts of charts.py on import (chart_writer imports this module), drawn from
# its row query.
CHARTS = {"metrics_series_chart": metrics_series_chart}
CHART_ROWS = {"metrics_series_chart": "model_metrics_series"}
charts.CHARTS.update(CHARTS)
charts.CHART_ROWS.update(CHART_ROWS)

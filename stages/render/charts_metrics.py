"""The engine's own /metrics through one benchmark point, beside the point's request timeline.

`metrics_series_chart` takes the samples of the point's /metrics series file (row query
model_metrics_series, from point_metrics_series): two panels on one time axis, seconds since the
point's first request was sent: above, the requests the engine had running and waiting; below,
the tokens it generated per second (the generation counter's change between samples). A stall
shows as requests running while the generation rate drops to zero; a queue as waiting above zero.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from stages.render import charts
from stages.render.charts import CHART_WIDTH, GREY, Y_AXIS_ALLOWANCE, _checked, series_colors

SERIES_REQUIRED = ["run_id", "series", "point_id", "sample_idx", "seconds", "running", "waiting",
                   "gen_tok_s"]
REQUEST_LINES = ["running", "waiting"]
PANEL_HEIGHT = 140


def series_rows(samples: pd.DataFrame) -> pd.DataFrame:
    """The samples in time order, as read (a failed scrape is not among them)."""
    df = _checked(samples, SERIES_REQUIRED, "samples")
    return df[df["seconds"].notna()].sort_values(["seconds", "sample_idx"], kind="stable").reset_index(drop=True)


def metrics_series_chart(samples: pd.DataFrame, color_domain: Sequence[str] | None = None
                         ) -> alt.VConcatChart:
    """One point's running and waiting requests and generated tokens per second, by the engine's
    own /metrics, second by second."""
    df = series_rows(samples)
    colors = series_colors(color_domain, df)
    colour = colors[0][1] if colors else GREY
    first = df.iloc[0] if len(df) else None
    what = f"{first['run_id']}, {first['point_id']}" if first is not None else ""
    width = CHART_WIDTH - Y_AXIS_ALLOWANCE
    x = alt.X("seconds:Q", title="Seconds from the first request sent")
    requests = df.melt(id_vars=["seconds", "sample_idx"], value_vars=REQUEST_LINES,
                       var_name="requests", value_name="count")
    upper = alt.Chart(requests).mark_line(point=True, interpolate="step-after").encode(
        x=x,
        y=alt.Y("count:Q", title="Requests"),
        color=alt.Color("requests:N", title="Requests", scale=alt.Scale(domain=REQUEST_LINES,
                                                                        range=[colour, GREY])),
        tooltip=[alt.Tooltip("seconds:Q", title="seconds", format=".1f"), alt.Tooltip("requests:N"),
                 alt.Tooltip("count:Q", title="requests")],
    ).properties(width=width, height=PANEL_HEIGHT)
    lower = alt.Chart(df[df["gen_tok_s"].notna()]).mark_line(point=True, color=colour).encode(
        x=x,
        y=alt.Y("gen_tok_s:Q", title="Generated tokens/s"),
        tooltip=[alt.Tooltip("seconds:Q", title="seconds", format=".1f"),
                 alt.Tooltip("gen_tok_s:Q", title="generated tokens/s", format=",.0f"),
                 alt.Tooltip("running:Q", title="running")],
    ).properties(width=width, height=PANEL_HEIGHT)
    return (
        alt.vconcat(upper, lower, spacing=12)
        .properties(title=alt.TitleParams(
            "The engine's own /metrics through one point",
            subtitle=[f"Point {what}.",
                      "Above: requests running and waiting; below: tokens generated per second, "
                      "from the generation counter's change between samples."],
            anchor="start"))
        .configure_legend(orient="bottom", direction="vertical")
    )


# Registered with the charts of charts.py on import (chart_writer imports this module), drawn from
# its row query.
CHARTS = {"metrics_series_chart": metrics_series_chart}
CHART_ROWS = {"metrics_series_chart": "model_metrics_series"}
charts.CHARTS.update(CHARTS)
charts.CHART_ROWS.update(CHART_ROWS)

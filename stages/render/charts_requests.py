"""Charts of single requests, beside the per-point charts of charts.py.

`latency_cdf_chart` takes the requests a model's latency figures are computed from (row query
model_request_latency): for each workload, the share of a point's requests that got their first
token within a time, one line per point, coloured by run spec, so that a model's setups can be
compared request by request, tails included (the p90 and p99 are where a line crosses 0.9 and
0.99).

`request_timeline_chart` takes the requests of one point (row query model_timeline): one row per
request in the order sent, a grey bar from when it was sent to its first token (waiting and
prefill) and a coloured bar from its first token to its last (decoding), on the client's clock.
Warm-up, queueing and stalls show as long grey bars or gaps.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from stages.render import charts
from stages.render.chart_parts import (FACET_SPACING, GREY, LEGEND, LOG_LABELS, Shape, _checked, _with_run_kind,
                                       color_scale, facet_layout, series_colors, single_panel, workload_facet)
from stages.render.charts import with_workload_rank

CDF_REQUIRED = ["run_id", "series", "workload", "concurrency", "provisional", "ttft_s"]
CDF_NOTE = [
    "One line per benchmark point (its first repeat): the share of its requests that got their",
    "first token within the time on the axis; requests that failed or came from the prefix cache",
    "are left out. The p90 and p99 lie where a line crosses 0.9 and 0.99. Dashed: provisional runs.",
    "A marker's shape gives the point's concurrent users.",
]
CDF_HEIGHT = 200
TIMELINE_REQUIRED = ["run_id", "series", "point_id", "request_idx", "sent_s", "first_token_s",
                     "last_token_s", "ok"]
TIMELINE_PHASES = ["waiting and prefill", "decoding"]
TIMELINE_ROW_PX = 7
TIMELINE_MIN_HEIGHT = 120
TIMELINE_MAX_HEIGHT = 420


def cdf_rows(requests: pd.DataFrame) -> pd.DataFrame:
    """The requests with their place in their point's distribution: `share`, the fraction of the
    point's requests with a TTFT at most theirs (i / n for the i-th fastest of n), and `line`,
    the point the line belongs to."""
    df = _with_run_kind(_checked(requests, CDF_REQUIRED, "requests"))
    df = df[df["ttft_s"].notna() & (df["ttft_s"] > 0)].copy()
    df["concurrency"] = df["concurrency"].astype(int)
    df = df.sort_values(["run_id", "workload", "concurrency", "ttft_s"], kind="stable")
    group = df.groupby(["run_id", "workload", "concurrency"], sort=False)["ttft_s"]
    df["share"] = (group.cumcount() + 1) / group.transform("size")
    df["line"] = df["run_id"] + " / " + df["workload"] + " / " + df["concurrency"].astype(str) + " users"
    return with_workload_rank(df)


def cdf_shape(requests: pd.DataFrame, color_domain: Sequence[str] | None = None
              ) -> tuple[pd.DataFrame, Shape]:
    """The CDF chart's rows (cdf_rows) and what its layout depends on: workloads and colours."""
    df = cdf_rows(requests)
    return df, Shape(int(df["workload"].nunique()), (), (), series_colors(color_domain, df))


def cdf_layout(shape: Shape, data) -> alt.FacetChart:
    columns, width = facet_layout(shape.workloads)
    tooltip = [
        alt.Tooltip("run_id:N", title="run"),
        alt.Tooltip("series:N", title="spec"),
        alt.Tooltip("workload:N"),
        alt.Tooltip("concurrency:Q", title="concurrent users"),
        alt.Tooltip("ttft_s:Q", title="TTFT (s)", format=".3f"),
        alt.Tooltip("share:Q", title="share of requests", format=".0%"),
    ]
    base = alt.Chart().encode(
        x=alt.X("ttft_s:Q", title="Time to first token (s, log scale)", scale=alt.Scale(type="log"),
                axis=alt.Axis(labelExpr=LOG_LABELS)),
        y=alt.Y("share:Q", title="Share of requests", scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%")),
        color=alt.Color("series:N", title="Setup", scale=color_scale(shape.colors)),
        tooltip=tooltip)
    dash = alt.StrokeDash("run_kind:N", title="Gate", legend=alt.Legend(),
                          scale=alt.Scale(domain=["measured", "provisional"], range=[[1, 0], [5, 3]]))
    line = base.mark_line(interpolate="step-after", strokeWidth=1.5).encode(
        detail="line:N", strokeDash=dash, order="share:Q")
    # the users of a line's point, told apart by its markers' shape (lines of one spec share a colour)
    users = alt.Shape("concurrency:O", title="Concurrent users", legend=alt.Legend(orient="bottom"))
    marks = base.mark_point(filled=True, size=30, opacity=0.9).encode(shape=users)
    return (
        alt.layer(line, marks, data=data)
        .properties(width=width, height=CDF_HEIGHT)
        .facet(facet=workload_facet(), columns=columns, spacing=FACET_SPACING)
        .properties(title=alt.TitleParams("Time to first token, request by request", subtitle=CDF_NOTE,
                                          anchor="start"))
        .resolve_scale(x="independent")
        .configure_legend(**LEGEND)
    )


def latency_cdf_chart(requests: pd.DataFrame, color_domain: Sequence[str] | None = None
                      ) -> alt.FacetChart:
    """The distribution of time to first token of each point's requests, by workload."""
    return cdf_layout(*reversed(cdf_shape(requests, color_domain)))


def timeline_rows(requests: pd.DataFrame) -> pd.DataFrame:
    """Two rows per request, one per phase (waiting and prefill; decoding), with `order`, the
    request's place in the order sent (from 1), and the phase's start and end."""
    df = _checked(requests, TIMELINE_REQUIRED, "requests")
    df = df[df["sent_s"].notna()].sort_values(["sent_s", "request_idx"], kind="stable").reset_index(drop=True)
    df["order"] = range(1, len(df) + 1)
    waiting = df.assign(phase=TIMELINE_PHASES[0], begin_s=df["sent_s"], end_s=df["first_token_s"])
    decoding = df.assign(phase=TIMELINE_PHASES[1], begin_s=df["first_token_s"], end_s=df["last_token_s"])
    both = pd.concat([waiting, decoding], ignore_index=True)
    return both[both["begin_s"].notna() & both["end_s"].notna()]


def timeline_shape(requests: pd.DataFrame, color_domain: Sequence[str] | None = None
                   ) -> tuple[pd.DataFrame, Shape]:
    """The timeline's rows (timeline_rows) and what its layout depends on: the point it draws
    (the note), the phases' colours (grey, then the run spec's), its height and tooltip."""
    df = timeline_rows(requests)
    colors = series_colors(color_domain, df)
    colour = colors[0][1] if colors else GREY
    first = df.iloc[0] if len(df) else None
    what = (f"{first['run_id']}, {first['point_id']}" if first is not None else "")
    height = max(TIMELINE_MIN_HEIGHT, min(TIMELINE_MAX_HEIGHT, TIMELINE_ROW_PX * int(df["order"].max() or 0)))
    return df, Shape(0, (), (f"Point {what}.",), tuple(zip(TIMELINE_PHASES, (GREY, colour))),
                            extra=(height, "output_tokens" in df.columns))


def timeline_layout(shape: Shape, data) -> alt.TopLevelMixin:
    height, output_tokens = shape.extra
    tooltip = [
        alt.Tooltip("request_idx:Q", title="request (file index)"),
        alt.Tooltip("phase:N"),
        alt.Tooltip("sent_s:Q", title="sent (s)", format=".3f"),
        alt.Tooltip("first_token_s:Q", title="first token (s)", format=".3f"),
        alt.Tooltip("last_token_s:Q", title="last token (s)", format=".3f"),
        alt.Tooltip("output_tokens:Q", title="output tokens") if output_tokens else alt.Tooltip("ok:N"),
        alt.Tooltip("ok:N", title="completed"),
    ]
    bars = alt.Chart(data).mark_bar(height=max(2, TIMELINE_ROW_PX - 2)).encode(
        x=alt.X("begin_s:Q", title="Seconds from the first request sent"),
        x2="end_s:Q",
        y=alt.Y("order:O", title="Requests, in the order sent", axis=alt.Axis(labels=False, ticks=False)),
        color=alt.Color("phase:N", title="Phase", scale=color_scale(shape.colors)),
        tooltip=tooltip)
    return single_panel(bars, height, "Each request of one point, from sent to last token",
                        [*shape.note, "Grey: sent until its first token (waiting and prefill); "
                                      "colour: first token until the last (decoding)."])


def request_timeline_chart(requests: pd.DataFrame, color_domain: Sequence[str] | None = None
                           ) -> alt.LayerChart:
    """One point's requests on the client's clock: sent, first token, last token."""
    rows, shape = timeline_shape(requests, color_domain)
    return timeline_layout(shape, rows)


# Registered with the charts of charts.py on import (chart_writer imports this module), each drawn
# from its row query.
CHARTS = {"latency_cdf_chart": latency_cdf_chart, "request_timeline_chart": request_timeline_chart}
CHART_ROWS = {"latency_cdf_chart": "model_request_latency", "request_timeline_chart": "model_timeline"}
charts.CHARTS.update(CHARTS)
charts.CHART_ROWS.update(CHART_ROWS)
charts.REQUEST_LAYOUTS.update({"latency_cdf_chart": (cdf_shape, cdf_layout),
                               "request_timeline_chart": (timeline_shape, timeline_layout)})

"""Charts: named functions that take rows of a public table and return Altair charts.

Charts of other rows register themselves in CHARTS (and CHART_ROWS, their row query) from their
own modules, which chart_writer.py imports: charts_node.py (the all-reduce sweep of a node probe),
charts_ramp.py (the multi-turn ramp), charts_requests.py (requests one by one), charts_metrics.py
(the engine's own /metrics series), charts_pareto.py (the setups' frontier), charts_prefill.py
(prefill rate against prompt length). What they all draw with (the series colours, a run's line
and markers, the workload facets, a chart's Shape) is chart_parts.py.

The scaling charts take one row per benchmark point (the public `bench_points` columns) plus
`series`, the run spec that names the run's colour. Every scaling chart is faceted by workload,
with concurrent users on a log2 axis. Two markings are shared by all of them:

- capacity-limited points (more users than the engine can hold) are drawn as grey squares with a
  diagonal hatch glyph on top, never hidden;
- provisional runs (quality gate below the minimum) get dashed lines and hollow markers, and the
  word "provisional" in the tooltip.
Rows that also carry `seq_cap` and `fit_by_kv` (a model section's points) get the two capacity
limits drawn as vertical rules where they fall inside a workload's range of users: the sequence
cap dashed, the sequences that fit the KV pool dotted.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import altair as alt
import pandas as pd

from stages.render.chart_notes import (NO_DECODE_NOTE, NO_TTFT_NOTE, markers, summary_note, tpot_note,
                                      whole_summary)
from stages.render.chart_parts import (CONCURRENCY_SCALE, GREY, LIMITS, LOG_LABELS, Shape, _checked,
                                       _facet, _layers, _shape, _with_run_kind, color_scale)

NOTE = [
    "Grey hatched squares: capacity-limited points (more users than the engine can hold at once);",
    "their latency mostly measures queueing. Dashed lines and hollow markers: provisional runs.",
]
REQUIRED = ["run_id", "series", "workload", "concurrency", "capacity_limited", "provisional"]
LIMIT_REACH = 2     # a limit is drawn up to this factor beyond the users measured, either side
# Panels an order of magnitude apart get a y axis each (chart_parts.Y_SPREAD), and a note saying so
OWN_Y_NOTE = "Each panel has its own y scale: the workloads' values are an order of magnitude apart."
PREPARED = "prepared"   # the attrs key prepare() marks its rows with


def prepare(points: pd.DataFrame) -> pd.DataFrame:
    """Bench points with the helper columns the charts encode (run_kind, note); rows already
    prepared (marked so in their attrs) are copied as they are: a model's four charts share them."""
    if points.attrs.get(PREPARED):
        return points.copy()
    df = _with_run_kind(_checked(points, REQUIRED, "bench points"))
    df["capacity_limited"] = df["capacity_limited"].fillna(False).astype(bool)
    summary = whole_summary(df)
    tpot = df["tpot_from"] if "tpot_from" in df.columns else [None] * len(df)
    df["note"] = [markers(*row) for row in zip(df["provisional"], df["capacity_limited"], summary, tpot)]
    df["concurrency"] = df["concurrency"].astype(int)
    df = with_workload_rank(df)
    if len(df):
        # the panels share one x axis, so a limit falls into every panel that the axis, one
        # doubling wider than the points on each side, reaches: the headroom a limit leaves
        # above the users measured shows too
        low, high = df["concurrency"].min() / LIMIT_REACH, df["concurrency"].max() * LIMIT_REACH
        for limit, column in LIMITS.items():
            if column in df.columns:
                value = pd.to_numeric(df[column], errors="coerce")
                df[limit] = value.where((value >= max(low, 1)) & (value <= high))
    df.attrs[PREPARED] = True
    return df


def with_workload_rank(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with `workload_rank`, each workload's place in prompt-length order (then output
    length, then name), which orders the panels. Rows that carry it (the chart writer gives every
    chart the campaign's order, row query workload_order) keep theirs; others are ranked by their
    own prompt and output tokens where they have them, else by name."""
    if "workload" not in rows.columns or "workload_rank" in rows.columns:
        return rows
    df = rows.copy()
    keys = pd.DataFrame(index=pd.Index(df["workload"].dropna().unique(), name="workload"))
    for column in ("prompt_tokens", "output_tokens"):
        keys[column] = (pd.to_numeric(df[column], errors="coerce").groupby(df["workload"]).median()
                        if column in df.columns else float("nan"))
    order = keys.reset_index().sort_values(["prompt_tokens", "output_tokens", "workload"],
                                           na_position="last", kind="stable")["workload"]
    df["workload_rank"] = df["workload"].map({w: i for i, w in enumerate(order)})
    return df


def _tooltip(value_field: str, value_title: str, fmt: str) -> list[alt.Tooltip]:
    return [
        alt.Tooltip("run_id:N", title="run"),
        alt.Tooltip("series:N", title="spec"),
        alt.Tooltip("workload:N"),
        alt.Tooltip("concurrency:Q", title="concurrent users"),
        alt.Tooltip(f"{value_field}:Q", title=value_title, format=fmt),
        alt.Tooltip("note:N", title="marked"),
    ]


TTFT_STATS = {"ttft_median_s": "median", "ttft_p90_s": "p90"}   # the columns the TTFT chart draws


def ttft_rows(points: pd.DataFrame, color_domain: Sequence[str] | None = None
              ) -> tuple[pd.DataFrame, Shape]:
    """The TTFT chart's rows (one per point and statistic) and shape. A point whose TTFT rests
    on no request (ttft_requests 0) has none and is left out, with a note."""
    df = prepare(points)
    note = NOTE
    if "ttft_requests" in df.columns and (df["ttft_requests"] == 0).any():
        df = df[df["ttft_requests"].isna() | (df["ttft_requests"] > 0)]
        note = NOTE + [NO_TTFT_NOTE]
    note = summary_note(df, note)
    # one row per point and statistic, as DataFrame.melt makes them (which is slow with many columns)
    rest = df.drop(columns=list(TTFT_STATS))
    long = pd.concat([rest.assign(stat=stat, ttft_s=df[column]) for column, stat in TTFT_STATS.items()],
                     ignore_index=True)
    long = long[long["ttft_s"].notna() & (long["ttft_s"] > 0)]
    long["line_key"] = long["run_id"] + "/" + long["stat"]
    return long, _shape(long, note, color_domain)


def ttft_layout(shape: Shape, data) -> alt.FacetChart:
    y = alt.Y("ttft_s:Q", title="Time to first token (s)", scale=alt.Scale(type="log"),
              axis=alt.Axis(labelExpr=LOG_LABELS))
    tooltip = _tooltip("ttft_s", "TTFT (s)", ".3f") + [alt.Tooltip("stat:N", title="statistic")]
    stat = alt.Shape("stat:N", title="Statistic",
                     scale=alt.Scale(domain=["median", "p90"], range=["circle", "triangle-up"]))
    layers = _layers(y, color_scale(shape.colors), tooltip, detail="line_key:N", shape=stat)
    return _facet(layers, shape, "Time to first token: median and p90", data)


def ttft_chart(points: pd.DataFrame, color_domain: Sequence[str] | None = None) -> alt.FacetChart:
    """Median and p90 time to first token (log scale) against concurrent users. A point whose
    TTFT rests on no request (ttft_requests 0: every request failed or came from the prefix cache)
    has no TTFT and is left out."""
    rows, shape = ttft_rows(points, color_domain)
    return ttft_layout(shape, rows)


# per-point figures drawn against concurrent users: field, axis title, tooltip title, title, and
# whether the figure may be the benchmark tool's own (figures_from; the note then says so)
METRICS = {
    "decode_chart": ("decode_tok_s_per_user", "Decode tokens/s per user", "tokens/s per user",
                     "Decode speed per user", True),
    "throughput_chart": ("output_tok_s", "Output tokens/s (all users)", "output tokens/s",
                         "Server output throughput", False),
}


def _metric_rows(name: str, points: pd.DataFrame, color_domain: Sequence[str] | None
                 ) -> tuple[pd.DataFrame, Shape]:
    field, _, _, _, summary = METRICS[name]
    df = prepare(points)
    missing = df[field].isna().any()
    df = df[df[field].notna()]
    note = tpot_note(df, summary_note(df, NOTE)) if summary else NOTE
    if summary and missing:
        note = note + [NO_DECODE_NOTE]
    shape = _shape(df, note, color_domain, y_field=field)
    return df, replace(shape, note=shape.note + ((OWN_Y_NOTE,) if shape.own_y else ()))


def _metric_layout(name: str, shape: Shape, data) -> alt.FacetChart:
    field, axis_title, tip_title, title, _ = METRICS[name]
    layers = _layers(alt.Y(f"{field}:Q", title=axis_title), color_scale(shape.colors),
                     _tooltip(field, tip_title, ".1f"))
    return _facet(layers, shape, title, data)


def decode_chart(points: pd.DataFrame, color_domain: Sequence[str] | None = None) -> alt.FacetChart:
    """Decode speed each user sees (1000 / median TPOT) against concurrent users."""
    rows, shape = _metric_rows("decode_chart", points, color_domain)
    return _metric_layout("decode_chart", shape, rows)


def throughput_chart(points: pd.DataFrame, color_domain: Sequence[str] | None = None) -> alt.FacetChart:
    """Total output tokens per second of the server against concurrent users."""
    rows, shape = _metric_rows("throughput_chart", points, color_domain)
    return _metric_layout("throughput_chart", shape, rows)


def completed_rows(points: pd.DataFrame, color_domain: Sequence[str] | None = None
                   ) -> tuple[pd.DataFrame, Shape]:
    df = prepare(points)
    shape = _shape(df, NOTE, color_domain, y_field="sent")
    return df, replace(shape, note=shape.note + ((OWN_Y_NOTE,) if shape.own_y else ()))


def completed_layout(shape: Shape, data) -> alt.FacetChart:
    y = alt.Y("completed:Q", title="Requests completed (tick: sent)")
    tooltip = _tooltip("completed", "completed", "d") + [alt.Tooltip("sent:Q", format="d")]
    sent = (alt.Chart().mark_tick(color=GREY, thickness=2, size=18)
            .encode(x=alt.X("concurrency:Q", scale=CONCURRENCY_SCALE),
                    y=alt.Y("sent:Q"), tooltip=tooltip))
    layers = [sent] + _layers(y, color_scale(shape.colors), tooltip)
    return _facet(layers, shape, "Requests completed of sent", data)


def completed_chart(points: pd.DataFrame, color_domain: Sequence[str] | None = None) -> alt.FacetChart:
    """Requests completed (markers) against requests sent (grey ticks) at each concurrency."""
    rows, shape = completed_rows(points, color_domain)
    return completed_layout(shape, rows)


CHARTS: dict[str, Callable[..., alt.TopLevelMixin]] = {
    "ttft_chart": ttft_chart,
    "decode_chart": decode_chart,
    "throughput_chart": throughput_chart,
    "completed_chart": completed_chart,
}
# Charts drawn from a named row query (stages/render/sql/render/<query>.sql) rather than from the bench
# points of a profile; the page passes the query's parameters to the chart macro (the page's
# profile among them, where the query binds one). Each gets the campaign-wide spec colours.
CHART_ROWS: dict[str, str] = {}     # filled by the modules that register such charts


def chart_by_name(name: str) -> Callable[..., alt.TopLevelMixin]:
    if name not in CHARTS:
        raise KeyError(f"unknown chart {name!r} (known: {', '.join(CHARTS)})")
    return CHARTS[name]


# The scaling charts as rows and a layout of a Shape: spec() builds a layout once per shape, so a
# campaign's hundreds of charts cost Altair (about 0.2 s a layered facet) a few dozen times.
LAYOUTS: dict[str, tuple[Callable[..., tuple[pd.DataFrame, Shape]], Callable[[Shape, Any], alt.TopLevelMixin]]] = {
    "ttft_chart": (ttft_rows, ttft_layout),
    "completed_chart": (completed_rows, completed_layout),
    **{name: (functools.partial(_metric_rows, name), functools.partial(_metric_layout, name))
       for name in METRICS},
}
ROWS = "rows"   # the dataset name a shared layout's rows are bound to
# Charts of rows other than bench points (charts_requests.py) that share layouts the same way,
# registered by their modules: name -> (rows and Shape, layout of a Shape)
REQUEST_LAYOUTS: dict[str, tuple[Callable[..., tuple[pd.DataFrame, Shape]], Callable[[Shape, Any], Any]]] = {}


@functools.lru_cache(maxsize=256)
def _layout_json(name: str, shape: Shape) -> str:
    layout = (LAYOUTS.get(name) or REQUEST_LAYOUTS[name])[1]
    return json.dumps(layout(shape, alt.NamedData(name=ROWS)).to_dict(validate=False))


def spec(name: str, rows: pd.DataFrame, color_domain: Sequence[str] | None = None) -> dict[str, Any]:
    """Chart `name` of `rows` as a Vega-Lite spec (a dict): the same chart its function draws, its
    data as the dataset ROWS; a chart's layout comes from the layouts already built."""
    laid_out = LAYOUTS.get(name) or REQUEST_LAYOUTS.get(name)
    if laid_out is None:
        return chart_by_name(name)(rows, color_domain).to_dict(validate=False)
    data, shape = laid_out[0](rows, color_domain)
    out = json.loads(_layout_json(name, replace(shape, colors=SERIES_STANDIN, note=(NOTE_STANDIN,))))
    return {**_with_own(out, shape.colors, shape.note), "datasets": {ROWS: records(data)}}


# What a shared layout is built with in place of a chart's own colours and notes (_with_own):
# charts of one shape but other specs, or other notes (the point a timeline draws), share it.
SERIES_STANDIN = (("series standing in", "#000000"),)
NOTE_STANDIN = "note standing in"    # each such line stands for the chart's notes


def _with_own(node: Any, colors: tuple[tuple[str, str], ...], note: tuple[str, ...]) -> Any:
    """The layout's spec with the stand-in colour scale replaced by `colors` and each note
    stand-in in a list by the lines of `note`."""
    if isinstance(node, dict):
        if node.get("domain") == [SERIES_STANDIN[0][0]]:
            return {**node, "domain": [n for n, _ in colors], "range": [c for _, c in colors]}
        return {k: _with_own(v, colors, note) for k, v in node.items()}
    if isinstance(node, list):
        return [line for v in node
                for line in (note if v == NOTE_STANDIN else [_with_own(v, colors, note)])]
    return node


def records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON records: NaN as null, times in ISO 8601, numbers to 15 significant digits
    (pandas writes them in C; Altair's own conversion takes ten times as long)."""
    return json.loads(rows.to_json(orient="records", date_format="iso", double_precision=15))

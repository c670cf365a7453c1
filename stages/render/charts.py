"""Charts: named functions that take rows of a public table and return Altair charts.

The node chart, `allreduce_chart`, takes node_allreduce rows of one probe (see CHART_ROWS): bus
bandwidth against message size on a log2 axis, one line per GPU group.

The ramp chart, `ramp_chart`, takes ramp_turns rows of the reported runs of a profile: the longest
wait for a first token at each turn against the conversation's length, marked by whether every
session found the needle from turn 1.

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
from dataclasses import dataclass, replace
from typing import Any

import altair as alt
import pandas as pd

PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2",
           "#b279a2", "#eeca3b", "#ff9da6", "#9d755d", "#bab0ac"]
GREY = "#a0a0a0"
HATCH_INK = "#404040"
# Three parallel diagonal strokes in the unit square: a hatch glyph drawn over the grey square.
HATCH_SHAPE = "M -1 1 L 1 -1 M -1 0 L 0 -1 M 0 1 L 1 0"
RUN_KINDS = ["measured", "provisional"]
NOTE = [
    "Grey hatched squares: capacity-limited points (more users than the engine can hold at once);",
    "their latency mostly measures queueing. Dashed lines and hollow markers: provisional runs.",
]
REQUIRED = ["run_id", "series", "workload", "concurrency", "capacity_limited", "provisional"]
LIMITS = {"cap_users": "seq_cap", "kv_users": "fit_by_kv"}     # rule column -> row column
LIMIT_TITLES = {"cap_users": "sequence cap", "kv_users": "sequences that fit the KV pool"}
LIMIT_NOTE = "Dashed rule: the sequence cap; dotted rule: the sequences that fit the KV pool."
# The whole chart (axis, facets, legends below) fits the article column of the site: the column
# is about 690 px wide on a desktop screen and vega-embed adds its action menu on the right.
PREPARED = "prepared"   # the attrs key prepare() marks its rows with
CHART_WIDTH = 600
Y_AXIS_ALLOWANCE = 70
FACET_SPACING = 16
MAX_FACET_COLUMNS = 3
FACET_HEIGHT = 190


def prepare(points: pd.DataFrame) -> pd.DataFrame:
    """Bench points with the helper columns the charts encode (run_kind, note); rows already
    prepared (marked so in their attrs) are copied as they are: a model's four charts share them."""
    if points.attrs.get(PREPARED):
        return points.copy()
    df = _with_run_kind(_checked(points, REQUIRED, "bench points"))
    df["capacity_limited"] = df["capacity_limited"].fillna(False).astype(bool)
    summary = _whole_summary(df)
    tpot = df["tpot_from"] if "tpot_from" in df.columns else [None] * len(df)
    df["note"] = [_markers(*row) for row in zip(df["provisional"], df["capacity_limited"], summary, tpot)]
    df["concurrency"] = df["concurrency"].astype(int)
    for limit, column in LIMITS.items():
        if column in df.columns:
            span = df.groupby("workload")["concurrency"].agg(["min", "max"])
            low, high = df["workload"].map(span["min"]), df["workload"].map(span["max"])
            value = pd.to_numeric(df[column], errors="coerce")
            df[limit] = value.where((value >= low) & (value <= high))
    df.attrs[PREPARED] = True
    return df


def _limit_rules(limits: Sequence[str]) -> list[alt.Chart]:
    """Vertical rules at the capacity limits in `limits` (LIMITS keys the rows carry in range)."""
    rules = []
    for limit, dash in (("cap_users", [6, 3]), ("kv_users", [2, 2])):
        if limit in limits:
            rules.append(alt.Chart().transform_filter(f"isValid(datum.{limit})")
                         .mark_rule(color=HATCH_INK, strokeDash=dash, strokeWidth=1)
                         .encode(x=alt.X(f"{limit}:Q", scale=alt.Scale(type="log", base=2)),
                                 tooltip=[alt.Tooltip("series:N", title="spec"),
                                          alt.Tooltip(f"{limit}:Q", title=LIMIT_TITLES[limit])]))
    return rules


def _checked(rows: pd.DataFrame, required: list[str], what: str) -> pd.DataFrame:
    """A copy of rows, which must have the `required` columns."""
    missing = [c for c in required if c not in rows.columns]
    if missing:
        raise ValueError(f"{what} lack columns: {', '.join(missing)}")
    return rows.copy()


def _with_run_kind(df: pd.DataFrame) -> pd.DataFrame:
    """The rows (changed in place) with `provisional` as a bool and `run_kind` (measured or provisional)."""
    df["provisional"] = df["provisional"].fillna(False).astype(bool)
    df["run_kind"] = df["provisional"].map({True: "provisional", False: "measured"})
    return df


def series_colors(domain: Sequence[str] | None, df: pd.DataFrame) -> tuple[tuple[str, str], ...]:
    """The run specs the rows draw, each with its colour. A spec's place in the campaign-wide
    domain fixes its colour, so colours agree across pages; a chart names only its own specs, so
    its spec does not grow with the campaign. Specs outside the domain follow it, by name."""
    order = list(domain or [])
    present = sorted(df["series"].dropna().unique())
    place = {n: i for i, n in enumerate(order)}
    for name in present:
        place.setdefault(name, len(place))
    names = sorted(present, key=place.__getitem__)
    return tuple((n, PALETTE[place[n] % len(PALETTE)]) for n in names)


def color_scale(colors: Sequence[tuple[str, str]]) -> alt.Scale:
    """The colour scale of (run spec, colour) pairs."""
    return alt.Scale(domain=[n for n, _ in colors], range=[c for _, c in colors])


def _tooltip(value_field: str, value_title: str, fmt: str) -> list[alt.Tooltip]:
    return [
        alt.Tooltip("run_id:N", title="run"),
        alt.Tooltip("series:N", title="spec"),
        alt.Tooltip("workload:N"),
        alt.Tooltip("concurrency:Q", title="concurrent users"),
        alt.Tooltip(f"{value_field}:Q", title=value_title, format=fmt),
        alt.Tooltip("note:N", title="marked"),
    ]


CONCURRENCY_X = alt.X("concurrency:Q", title="Concurrent users",
                      scale=alt.Scale(type="log", base=2), axis=alt.Axis(format="d"))


def _layers(y: alt.Y, color: alt.Scale, tooltip: list, detail: str = "run_id:N",
            shape: alt.Shape | None = None, x: alt.X = CONCURRENCY_X,
            capacity: bool = True) -> list[alt.Chart]:
    """A line per run and its markers: filled when measured, hollow when provisional; with
    `capacity`, capacity-limited points are grey hatched squares instead."""
    colour = alt.Color("series:N", title="Run spec", scale=color)
    dash = alt.StrokeDash("run_kind:N", title="Gate", legend=alt.Legend(),
                          scale=alt.Scale(domain=RUN_KINDS, range=[[1, 0], [5, 3]]))
    base = alt.Chart().encode(x=x, y=y, tooltip=tooltip)
    extra = {"shape": shape} if shape is not None else {}
    unlimited = "!datum.capacity_limited && " if capacity else ""
    line = base.mark_line(strokeWidth=1.5).encode(color=colour, strokeDash=dash, detail=detail)
    measured = (base.transform_filter(f"{unlimited}!datum.provisional")
                .mark_point(filled=True, size=55, opacity=1).encode(color=colour, **extra))
    provisional = (base.transform_filter(f"{unlimited}datum.provisional")
                   .mark_point(filled=False, size=55, strokeWidth=1.5).encode(color=colour, **extra))
    if not capacity:
        return [line, measured, provisional]
    limited = (base.transform_filter("datum.capacity_limited")
               .mark_square(color=GREY, size=110, opacity=0.75))
    hatch = (base.transform_filter("datum.capacity_limited")
             .mark_point(shape=HATCH_SHAPE, size=110, color=HATCH_INK, strokeWidth=1, filled=False))
    return [line, measured, provisional, limited, hatch]


def facet_layout(workloads: int, total_width: int = CHART_WIDTH) -> tuple[int, int]:
    """(columns, width of one facet) so that the facets side by side fit total_width."""
    columns = max(1, min(workloads, MAX_FACET_COLUMNS))
    inner = total_width - Y_AXIS_ALLOWANCE - FACET_SPACING * (columns - 1)
    return columns, inner // columns


NO_TTFT_NOTE = "Not drawn: points with no TTFT (every request failed or came from the prefix cache)."
NO_DECODE_NOTE = ("Not drawn: points with no decode speed (no request completed, or no time per "
                  "output token in the result file: see pareto_left_out).")
SUMMARY_NOTE = ("Marked tool summary: the benchmark tool's own percentiles as its result file holds "
                "them (no per-request timings to compute them from).")
SUMMARY = "tool summary"


def _markers(provisional: bool, limited: bool, summary: bool, tpot_from: str | None) -> str:
    """A point's note: provisional, capacity-limited, its figures the tool's summary, or, its
    other figures its requests', where its TPOT alone comes from (TPOT_NOTES)."""
    words = [w for w, on in (("provisional", provisional), ("capacity-limited", limited), (SUMMARY, summary)) if on]
    if not summary and tpot_from in TPOT_NOTES:
        words.append(TPOT_NOTES[tpot_from][0])
    return ", ".join(words) or "-"


def _whole_summary(df: pd.DataFrame) -> pd.Series:
    """Rows whose figures are all the benchmark tool's own summary (figures_from)."""
    if "figures_from" not in df.columns:
        return pd.Series(False, index=df.index)
    return df["figures_from"] == SUMMARY


def _summary_note(df: pd.DataFrame, note: list[str]) -> list[str]:
    """The note, saying so when any point's figures are the benchmark tool's own summary."""
    if _whole_summary(df).any():
        return note + [SUMMARY_NOTE]
    return note


# Where a point's time per output token comes from, when not each request's latency
# (bench_points.tpot_from): its marker in the point's note, and the chart's note.
TPOT_NOTES = {
    "itls": ("TPOT from itls", "Marked TPOT from itls: time per output token from the gaps between each "
                               "request's tokens, its result file holding no latencies."),
    SUMMARY: ("TPOT from tool summary", "Marked TPOT from tool summary: the benchmark tool's own "
                                        "median time per output token (no per-request times)."),
}


def _tpot_note(df: pd.DataFrame, note: list[str]) -> list[str]:
    """The note, saying where the decode speeds come from where it is not each request's latency
    (a point whose figures are all the tool's summary is said so by SUMMARY_NOTE already)."""
    if "tpot_from" not in df.columns:
        return note
    found = set(df.loc[~_whole_summary(df), "tpot_from"].dropna())
    return note + [TPOT_NOTES[k][1] for k in sorted(found) if k in TPOT_NOTES]


@dataclass(frozen=True)
class Shape:
    """What a scaling chart's layout depends on besides its rows: the number of workloads (its
    facets), the capacity limits drawn, the notes under the title, the run specs coloured. Charts
    of one shape share one layout (see spec()), their rows bound to it under the name ROWS."""
    workloads: int
    limits: tuple[str, ...]
    note: tuple[str, ...]
    colors: tuple[tuple[str, str], ...]


def _shape(df: pd.DataFrame, note: Sequence[str], domain: Sequence[str] | None) -> Shape:
    limits = tuple(k for k in LIMITS if k in df.columns and df[k].notna().any())
    return Shape(int(df["workload"].nunique()), limits, tuple(note), series_colors(domain, df))


def _facet(layers: list[alt.Chart], shape: Shape, title: str, data) -> alt.FacetChart:
    columns, width = facet_layout(shape.workloads)
    rules = _limit_rules(shape.limits)
    note = list(shape.note) + ([LIMIT_NOTE] if rules else [])
    return (
        alt.layer(*rules, *layers, data=data)
        .properties(width=width, height=FACET_HEIGHT)
        .facet(facet=alt.Facet("workload:N", title=None, header=alt.Header(labelFontWeight="bold")),
               columns=columns, spacing=FACET_SPACING)
        .properties(title=alt.TitleParams(title, subtitle=note, anchor="start"))
        .resolve_scale(y="shared")
        .configure_legend(orient="bottom", direction="vertical")
    )


def ttft_rows(points: pd.DataFrame, color_domain: Sequence[str] | None = None
              ) -> tuple[pd.DataFrame, Shape]:
    """The TTFT chart's rows (one per point and statistic) and shape. A point whose TTFT rests
    on no request (ttft_requests 0) has none and is left out, with a note."""
    df = prepare(points)
    note = NOTE
    if "ttft_requests" in df.columns and (df["ttft_requests"] == 0).any():
        df = df[df["ttft_requests"].isna() | (df["ttft_requests"] > 0)]
        note = NOTE + [NO_TTFT_NOTE]
    note = _summary_note(df, note)
    long = df.melt(id_vars=[c for c in df.columns if c not in ("ttft_median_s", "ttft_p90_s")],
                   value_vars=["ttft_median_s", "ttft_p90_s"], var_name="stat", value_name="ttft_s")
    long["stat"] = long["stat"].map({"ttft_median_s": "median", "ttft_p90_s": "p90"})
    long = long[long["ttft_s"].notna() & (long["ttft_s"] > 0)]
    long["line_key"] = long["run_id"] + "/" + long["stat"]
    return long, _shape(long, note, color_domain)


def ttft_layout(shape: Shape, data) -> alt.FacetChart:
    y = alt.Y("ttft_s:Q", title="Time to first token (s)", scale=alt.Scale(type="log"))
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
    note = _tpot_note(df, _summary_note(df, NOTE)) if summary else NOTE
    if summary and missing:
        note = note + [NO_DECODE_NOTE]
    return df, _shape(df, note, color_domain)


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
    return df, _shape(df, NOTE, color_domain)


def completed_layout(shape: Shape, data) -> alt.FacetChart:
    y = alt.Y("completed:Q", title="Requests completed (tick: sent)")
    tooltip = _tooltip("completed", "completed", "d") + [alt.Tooltip("sent:Q", format="d")]
    sent = (alt.Chart().mark_tick(color=GREY, thickness=2, size=18)
            .encode(x=alt.X("concurrency:Q", scale=alt.Scale(type="log", base=2)),
                    y=alt.Y("sent:Q"), tooltip=tooltip))
    layers = [sent] + _layers(y, color_scale(shape.colors), tooltip)
    return _facet(layers, shape, "Requests completed of sent", data)


def completed_chart(points: pd.DataFrame, color_domain: Sequence[str] | None = None) -> alt.FacetChart:
    """Requests completed (markers) against requests sent (grey ticks) at each concurrency."""
    rows, shape = completed_rows(points, color_domain)
    return completed_layout(shape, rows)


# ---------------------------------------------------------------- node probes

ALLREDUCE_REQUIRED = ["gpu_group", "ranks", "message_bytes", "busbw_gbs", "algbw_gbs", "time_us",
                      "spans_islands"]
ALLREDUCE_NOTE = [
    "Bus bandwidth = algorithm bandwidth (message bytes / time) x 2(n-1)/n for n GPUs, as nccl-tests",
    "defines it; comparable across group sizes. Dashed lines: groups whose GPUs span NVLink islands.",
]
ISLAND_KINDS = ["one NVLink island", "spans islands", "topology unknown"]
# Axis labels of a byte count in binary units (KiB, MiB, GiB), for a log2 axis of powers of two.
BYTES_LABEL = ("datum.value >= 1073741824 ? format(datum.value / 1073741824, '~g') + ' GiB' : "
               "datum.value >= 1048576 ? format(datum.value / 1048576, '~g') + ' MiB' : "
               "datum.value >= 1024 ? format(datum.value / 1024, '~g') + ' KiB' : "
               "format(datum.value, '~g') + ' B'")
ALLREDUCE_HEIGHT = 260


def size_label(nbytes: int) -> str:
    """4294967296 -> '4 GiB'; 1048576 -> '1 MiB'; 1536 -> '1.5 KiB'."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:g} {unit}"
    return f"{nbytes} B"


def prepare_allreduce(sweeps: pd.DataFrame) -> pd.DataFrame:
    """All-reduce rows with the helper columns the chart encodes (size label, island kind)."""
    df = _checked(sweeps, ALLREDUCE_REQUIRED, "all-reduce rows")
    df["message_bytes"] = df["message_bytes"].astype("int64")
    df["size"] = [size_label(int(b)) for b in df["message_bytes"]]
    df["islands"] = [ISLAND_KINDS[2] if pd.isna(v) else ISLAND_KINDS[1] if v else ISLAND_KINDS[0]
                     for v in df["spans_islands"]]
    df["group"] = [f"GPUs {g} ({int(n)} ranks)" for g, n in zip(df["gpu_group"], df["ranks"])]
    return df[df["busbw_gbs"].notna() & (df["message_bytes"] > 0)]


def allreduce_chart(sweeps: pd.DataFrame, color_domain: Sequence[str] | None = None) -> alt.LayerChart:
    """All-reduce bus bandwidth (GB/s) against message size, one line per GPU group.

    Coloured by group: color_domain, the run specs, does not apply."""
    df = prepare_allreduce(sweeps)
    groups = list(dict.fromkeys(df.sort_values(["ranks", "gpu_group"])["group"]))
    colour = alt.Color("group:N", title="GPU group", sort=groups,
                       scale=alt.Scale(domain=groups, range=[PALETTE[i % len(PALETTE)]
                                                             for i in range(len(groups))]))
    x = alt.X("message_bytes:Q", title="Message size per GPU (log2 scale)",
              scale=alt.Scale(type="log", base=2),
              axis=alt.Axis(labelExpr=BYTES_LABEL, values=sorted(df["message_bytes"].unique().tolist()),
                            labelAngle=-40, labelOverlap="parity"))
    y = alt.Y("busbw_gbs:Q", title="Bus bandwidth (GB/s)")
    tooltip = [
        alt.Tooltip("group:N", title="GPU group"),
        alt.Tooltip("size:N", title="message"),
        alt.Tooltip("busbw_gbs:Q", title="bus GB/s", format=".1f"),
        alt.Tooltip("algbw_gbs:Q", title="algorithm GB/s", format=".1f"),
        alt.Tooltip("time_us:Q", title="time (us)", format=".1f"),
        alt.Tooltip("islands:N", title="NVLink"),
    ]
    dash = alt.StrokeDash("islands:N", title="NVLink", legend=alt.Legend(),
                          scale=alt.Scale(domain=ISLAND_KINDS, range=[[1, 0], [5, 3], [2, 2]]))
    base = alt.Chart(df).encode(x=x, y=y, tooltip=tooltip)
    line = base.mark_line(strokeWidth=1.8).encode(color=colour, strokeDash=dash, detail="gpu_group:N")
    points = base.mark_point(filled=True, size=45, opacity=1).encode(color=colour)
    return (
        alt.layer(line, points)
        .properties(width=CHART_WIDTH - Y_AXIS_ALLOWANCE, height=ALLREDUCE_HEIGHT,
                    title=alt.TitleParams("All-reduce bus bandwidth by message size",
                                          subtitle=ALLREDUCE_NOTE, anchor="start"))
        .configure_legend(orient="bottom", direction="vertical")
    )


# ---------------------------------------------------------------- the ramp

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
    return (
        alt.layer(*layers, data=df)
        .properties(width=CHART_WIDTH - Y_AXIS_ALLOWANCE, height=RAMP_HEIGHT,
                    title=alt.TitleParams("The ramp: waiting for each turn of a growing conversation",
                                          subtitle=RAMP_NOTE, anchor="start"))
        .configure_legend(orient="bottom", direction="vertical")
    )


CHARTS: dict[str, Callable[..., alt.TopLevelMixin]] = {
    "ttft_chart": ttft_chart,
    "decode_chart": decode_chart,
    "throughput_chart": throughput_chart,
    "completed_chart": completed_chart,
    "allreduce_chart": allreduce_chart,
    "ramp_chart": ramp_chart,
}
# Charts drawn from a named row query (stages/render/sql/render/<query>.sql) rather than from the bench
# points of a profile; the page passes the query's parameters to the chart macro (the page's
# profile among them, where the query binds one). Each gets the campaign-wide spec colours.
CHART_ROWS: dict[str, str] = {
    "allreduce_chart": "allreduce_points",
    "ramp_chart": "ramp_points",
}


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
    out = json.loads(_layout_json(name, replace(shape, colors=SERIES_STANDIN)))
    return {**_with_colors(out, shape.colors), "datasets": {ROWS: records(data)}}


# the colours a shared layout is built with, replaced in its spec by the chart's own (_with_colors):
# charts of one shape but other specs share the layout
SERIES_STANDIN = (("series standing in", "#000000"),)


def _with_colors(node: Any, colors: tuple[tuple[str, str], ...]) -> Any:
    """The spec with the stand-in colour scale replaced by `colors`."""
    if isinstance(node, dict):
        if node.get("domain") == [SERIES_STANDIN[0][0]]:
            return {**node, "domain": [n for n, _ in colors], "range": [c for _, c in colors]}
        return {k: _with_colors(v, colors) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_colors(v, colors) for v in node]
    return node


def records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON records: NaN as null, times in ISO 8601, numbers to 15 significant digits
    (pandas writes them in C; Altair's own conversion takes ten times as long)."""
    return json.loads(rows.to_json(orient="records", date_format="iso", double_precision=15))


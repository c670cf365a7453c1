"""What every chart is drawn with: the series colours, the line and markers of a run, the
capacity-limit rules, the workload facets and their widths, and a scaling chart's Shape (what its
layout depends on besides its rows). charts.py and the charts_*.py modules beside it draw with
these; the rows they draw are checked here too (`_checked`, `_with_run_kind`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd

# The campaign's series colours, in the order series are placed (row query series_domain: the
# order they were first run): twenty, so that a campaign's setups do not share one.
PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2",
           "#b279a2", "#eeca3b", "#ff9da6", "#9d755d", "#bab0ac",
           "#003f5c", "#d45087", "#2f7d32", "#ffa600", "#665191",
           "#8c564b", "#17becf", "#7f7f7f", "#bcbd22", "#a05195"]
GREY = "#a0a0a0"
HATCH_INK = "#404040"
# Three parallel diagonal strokes in the unit square: a hatch glyph drawn over the grey square.
HATCH_SHAPE = "M -1 1 L 1 -1 M -1 0 L 0 -1 M 0 1 L 1 0"
RUN_KINDS = ["measured", "provisional"]
LIMITS = {"cap_users": "seq_cap", "kv_users": "fit_by_kv"}     # rule column -> row column
LIMIT_TITLES = {"cap_users": "sequence cap", "kv_users": "sequences that fit the KV pool"}
LIMIT_NOTE = "Dashed rule: the sequence cap; dotted rule: the sequences that fit the KV pool."
# Panels whose largest values differ by this factor or more get a y axis each (a 1M-token
# panel's few tokens/s are not flattened against a short prompt's thousands); charts.py notes it.
Y_SPREAD = 10
# The whole chart (axis, facets, legends below) fits the article column of the site: the column
# is about 690 px wide on a desktop screen and vega-embed adds its action menu on the right.
# Legends below the chart, one entry a line, labels whole (a setup's name with its image tag)
LEGEND = {"orient": "bottom", "direction": "vertical", "labelLimit": 400}
CHART_WIDTH = 600
Y_AXIS_ALLOWANCE = 70
FACET_SPACING = 16
MAX_FACET_COLUMNS = 3
FACET_HEIGHT = 190


def _limit_rules(limits: Sequence[str]) -> list[alt.Chart]:
    """Vertical rules at the capacity limits in `limits` (LIMITS keys the rows carry in range)."""
    rules = []
    for limit, dash in (("cap_users", [6, 3]), ("kv_users", [2, 2])):
        if limit in limits:
            rules.append(alt.Chart().transform_filter(f"isValid(datum.{limit})")
                         .mark_rule(color=HATCH_INK, strokeDash=dash, strokeWidth=1)
                         .encode(x=alt.X(f"{limit}:Q", scale=CONCURRENCY_SCALE),
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


# A log axis labels only 1, 2 and 5 of each power of ten (its other ticks stay, unlabelled), so
# that labels never run together ("0.40.5", "5060").
LOG_LABELS = ("indexof([1, 2, 5], round(datum.value / pow(10, floor(log(datum.value) / LN10)))) >= 0"
              " ? format(datum.value, '~g') : ''")
# log2 users, padded so that a marker at either end is drawn whole
CONCURRENCY_SCALE = alt.Scale(type="log", base=2, padding=12)
CONCURRENCY_X = alt.X("concurrency:Q", title="Concurrent users", scale=CONCURRENCY_SCALE,
                      axis=alt.Axis(labelExpr="datum.value >= 1 ? format(datum.value, 'd') : ''",
                                    labelOverlap="greedy"))


def _layers(y: alt.Y, color: alt.Scale, tooltip: list, detail: str = "run_id:N",
            shape: alt.Shape | None = None, x: alt.X = CONCURRENCY_X,
            capacity: bool = True) -> list[alt.Chart]:
    """A line per run and its markers: filled when measured, hollow when provisional; with
    `capacity`, capacity-limited points are grey hatched squares instead."""
    colour = alt.Color("series:N", title="Setup", scale=color)
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


def single_panel(chart: alt.TopLevelMixin, height: int, title: str, note: Sequence[str]) -> alt.TopLevelMixin:
    """A chart of one panel across the column: its size, its title and note, its legend below."""
    return (chart.properties(width=CHART_WIDTH - Y_AXIS_ALLOWANCE, height=height,
                             title=alt.TitleParams(title, subtitle=note, anchor="start"))
            .configure_legend(**LEGEND))


def facet_layout(workloads: int, total_width: int = CHART_WIDTH) -> tuple[int, int]:
    """(columns, width of one facet) so that the facets side by side fit total_width."""
    columns = max(1, min(workloads, MAX_FACET_COLUMNS))
    inner = total_width - Y_AXIS_ALLOWANCE - FACET_SPACING * (columns - 1)
    return columns, inner // columns


@dataclass(frozen=True)
class Shape:
    """What a scaling chart's layout depends on besides its rows: the number of workloads (its
    facets), the capacity limits drawn, the notes under the title, the run specs coloured. Charts
    of one shape share one layout (see charts.spec()), their rows bound to it under the name ROWS."""
    workloads: int
    limits: tuple[str, ...]
    note: tuple[str, ...]
    colors: tuple[tuple[str, str], ...]
    extra: tuple = ()      # what else a layout of another kind depends on (a timeline's height)
    own_y: bool = False    # each panel its own y scale (panels an order of magnitude apart)


def _shape(df: pd.DataFrame, note: Sequence[str], domain: Sequence[str] | None,
           y_field: str | None = None) -> Shape:
    limits = tuple(k for k in LIMITS if k in df.columns and df[k].notna().any())
    own_y = y_field is not None and spread(df, y_field) >= Y_SPREAD
    return Shape(int(df["workload"].nunique()), limits, tuple(note), series_colors(domain, df),
                 own_y=own_y)


def spread(df: pd.DataFrame, field: str) -> float:
    """The largest panel's highest value over the smallest panel's highest (1 for one panel)."""
    tops = pd.to_numeric(df[field], errors="coerce").groupby(df["workload"]).max()
    tops = tops[tops > 0]
    return float(tops.max() / tops.min()) if len(tops) > 1 else 1.0


def workload_facet(**header: Any) -> alt.Facet:
    """The workload panels, in prompt-length order (`workload_rank`)."""
    return alt.Facet("workload:N", title=None, sort=alt.EncodingSortField(field="workload_rank", op="min"),
                     header=alt.Header(labelFontWeight="bold", **header))


def _facet(layers: list[alt.Chart], shape: Shape, title: str, data) -> alt.FacetChart:
    columns, width = facet_layout(shape.workloads)
    rules = _limit_rules(shape.limits)
    note = list(shape.note) + ([LIMIT_NOTE] if rules else [])
    return (
        alt.layer(*rules, *layers, data=data)
        .properties(width=width, height=FACET_HEIGHT)
        .facet(facet=workload_facet(), columns=columns, spacing=FACET_SPACING)
        .properties(title=alt.TitleParams(title, subtitle=note, anchor="start"))
        .resolve_scale(y="independent" if shape.own_y else "shared")
        .resolve_axis(x="independent")      # each panel its own x axis: none under an empty cell
        .configure_legend(**LEGEND)
    )

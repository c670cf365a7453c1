"""The run time chart, `run_time_chart`: where each run's time went.

It takes a Part's runs (row query part_run_phases: run_phases, each run's seconds by kind of phase
read from launch.out's engine_times, gate_times, step_times and finished_at, or estimated from a
run's GPU sampler files where it was written before those lines) and draws one horizontal bar per
run, its phases stacked in a fixed order: the engine starting, the needle gate, the client
preparing each point, the requests, the tail after the last answer, untimed steps, the gaps
between, the end. What is not requests is time the GPUs held the run without serving a point.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from stages.render import charts
from stages.render.chart_parts import CHART_WIDTH, _checked, single_panel

RUN_TIME_REQUIRED = ["run_id", "series", "phase", "seconds", "estimated"]
# the phases in the order they are stacked, with the label the legend gives each
PHASES = {
    "engine_start": "engine starting",
    "gate": "needle gate",
    "client_prep": "client preparing a point",
    "requests": "requests",
    "tail": "after the last answer",
    "step": "untimed step",
    "gap": "between phases",
    "end": "stopping",
}
PHASE_COLORS = ["#72b7b2", "#8c6bb1", "#e6550d", "#3182bd", "#fdae6b", "#bdbdbd", "#d9d9d9", "#636363"]
ROW_HEIGHT = 28
RUN_LABEL_PX = 220      # the widest run label drawn whole (a setup and the run's time stamp)
RUN_TIME_NOTE = [
    "One bar per run: its wall time split by phase, read from the lines its run stage wrote.",
    "Only the blue part served requests; the rest the GPUs held the run without serving a point.",
    "Paler bars: runs written before those lines, their phases estimated from the GPU samplers.",
]


def run_time_rows(phases: pd.DataFrame) -> pd.DataFrame:
    """The phases with a label, their stacking order and the run's label (its setup and run id)."""
    df = _checked(phases, RUN_TIME_REQUIRED, "run phases").copy()
    df = df[df["seconds"].notna() & df["phase"].isin(list(PHASES))]
    df["phase_label"] = df["phase"].map(PHASES)
    df["phase_rank"] = df["phase"].map({p: i for i, p in enumerate(PHASES)})
    df["run_label"] = df["series"].fillna(df["run_id"]).astype(str) + " · " + df["run_id"].str[-11:]
    df["estimated"] = df["estimated"].fillna(False).astype(bool)
    df["minutes"] = df["seconds"] / 60.0
    return df.sort_values(["run_id", "phase_rank"], kind="stable")


def run_time_chart(phases: pd.DataFrame, color_domain: Sequence[str] | None = None) -> alt.TopLevelMixin:
    """A stacked horizontal bar per run of its phase minutes."""
    df = run_time_rows(phases)
    runs = list(dict.fromkeys(df["run_label"]))
    colour = alt.Color("phase_label:N", title="Phase",
                       scale=alt.Scale(domain=list(PHASES.values()), range=PHASE_COLORS),
                       sort=list(PHASES.values()))
    bars = alt.Chart(df).mark_bar(stroke="white", strokeWidth=0.5).encode(
        x=alt.X("sum(minutes):Q", title="Wall time (minutes)", stack="zero",
                axis=alt.Axis(labelFlush=True)),      # the last label inside the plot, not cut
        y=alt.Y("run_label:N", title=None, sort=runs, axis=alt.Axis(labelLimit=RUN_LABEL_PX)),
        color=colour,
        order=alt.Order("phase_rank:Q"),
        opacity=alt.condition("datum.estimated", alt.value(0.55), alt.value(1.0)),
        tooltip=[
            alt.Tooltip("run_id:N", title="run"),
            alt.Tooltip("series:N", title="setup"),
            alt.Tooltip("phase_label:N", title="phase"),
            alt.Tooltip("seconds:Q", title="seconds", format=",.1f"),
            alt.Tooltip("share_pct:Q", title="share of the run (%)", format=".1f"),
            alt.Tooltip("estimated:N", title="estimated"),
        ])
    height = max(ROW_HEIGHT * len(runs), 60)
    # the run labels are wider than a scaling chart's y axis: the bars give way so the chart
    # keeps to the article column
    return (single_panel(bars, height, "Where each run's time went", RUN_TIME_NOTE)
            .properties(width=CHART_WIDTH - RUN_LABEL_PX - 20))


# Registered with the charts of charts.py on import (chart_writer imports this module), drawn from
# its row query over a Part's runs.
charts.CHARTS["run_time_chart"] = run_time_chart
charts.CHART_ROWS["run_time_chart"] = "part_run_phases"

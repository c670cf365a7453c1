"""The node chart, `allreduce_chart`: node_allreduce rows of one probe (row query allreduce_points),
bus bandwidth against message size on a log2 axis, one line per GPU group, dashed where the group
spans NVLink islands. Registered with the charts of charts.py on import (chart_writer imports
this module).
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from stages.render import charts
from stages.render.chart_parts import PALETTE, _checked, single_panel

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
    return single_panel(alt.layer(line, points), ALLREDUCE_HEIGHT,
                        "All-reduce bus bandwidth by message size", ALLREDUCE_NOTE)


charts.CHARTS["allreduce_chart"] = allreduce_chart
charts.CHART_ROWS["allreduce_chart"] = "allreduce_points"

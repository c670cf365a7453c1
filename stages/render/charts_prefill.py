"""The prefill chart, `prefill_chart`: did a setup keep its prefill rate as the prompt grew?

It takes the one-user points of a Part's setups (row query part_prefill_points: each point's
prompt length and its prefill rate, the median over its requests of prompt tokens over time to
first token, the figure the tables print as point_prefill_tok_s) and draws the rate against the
prompt length on a log axis, one line per run through its workloads, every model of the Part on
the same axes. With one user nothing queues, so the rate is the engine's own. Points whose prompts
were partly served from the prefix cache are diamonds (their rate counts tokens the engine did
not compute); provisional runs are dashed with hollow markers.
"""
from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from stages.render import charts
from stages.render.chart_parts import (_checked, _layers, _with_run_kind, color_scale, series_colors,
                                       single_panel)

PREFILL_REQUIRED = ["run_id", "series", "workload", "prompt_tokens", "prefill_tok_s", "provisional"]
POINT_KINDS = ["computed", "partly from the prefix cache"]
PREFILL_HEIGHT = 260
PREFILL_NOTE = [
    "One user at a time, every workload a setup ran: the median over a point's requests of",
    "prompt tokens over time to first token. A flat line kept its rate as the prompt grew.",
    "Diamonds: prompts partly served from the prefix cache (the rate counts tokens not computed).",
    "Dashed lines and hollow markers: provisional runs.",
]
# prompt lengths as the workloads name them: a round thousand or million as such (256K, 1M), a
# power of two in binary thousands (1K for 1,024, 32K for 32,768), else three figures
TOKENS_LABEL = ("datum.value % 1e6 == 0 ? format(datum.value / 1e6, 'd') + 'M'"
                " : datum.value % 1e3 == 0 ? format(datum.value / 1e3, 'd') + 'K'"
                " : datum.value % 1024 == 0 ? format(datum.value / 1024, 'd') + 'K'"
                " : datum.value >= 1e3 ? format(datum.value / 1e3, '.3~g') + 'K' : format(datum.value, 'd')")


def prefill_rows(points: pd.DataFrame) -> pd.DataFrame:
    """The points with a rate, in prompt-length order, with `run_kind` and `kind` (computed or
    partly from the prefix cache)."""
    df = _with_run_kind(_checked(points, PREFILL_REQUIRED, "prefill points"))
    df = df[df["prefill_tok_s"].notna() & df["prompt_tokens"].notna()].copy()
    cached = df["cached"].fillna(False).astype(bool) if "cached" in df.columns else False
    df["kind"] = [POINT_KINDS[1] if c else POINT_KINDS[0]
                  for c in (cached if isinstance(cached, pd.Series) else [False] * len(df))]
    return df.sort_values(["series", "run_id", "prompt_tokens", "workload"], kind="stable")


def prefill_chart(points: pd.DataFrame, color_domain: Sequence[str] | None = None) -> alt.LayerChart:
    """Prefill rate (prompt tokens/s) against prompt length with one user, a line per run."""
    df = prefill_rows(points)
    colors = series_colors(color_domain, df)
    lengths = sorted({int(v) for v in df["prompt_tokens"]})
    x = alt.X("prompt_tokens:Q", title="Prompt length (tokens, log scale)",
              scale=alt.Scale(type="log", padding=12),
              axis=alt.Axis(values=lengths, labelExpr=TOKENS_LABEL, labelOverlap="greedy"))
    y = alt.Y("prefill_tok_s:Q", title="Prefill rate (prompt tokens/s)", scale=alt.Scale(zero=True))
    tooltip = [
        alt.Tooltip("run_id:N", title="run"),
        alt.Tooltip("series:N", title="setup"),
        alt.Tooltip("workload:N"),
        alt.Tooltip("prompt_tokens:Q", title="prompt tokens", format=","),
        alt.Tooltip("prefill_tok_s:Q", title="prefill tokens/s", format=",.0f"),
        alt.Tooltip("kind:N", title="prompt"),
        alt.Tooltip("run_kind:N", title="gate"),
    ] + ([alt.Tooltip("requests:Q", title="requests")] if "requests" in df.columns else [])
    shape = alt.Shape("kind:N", title="Prompt", scale=alt.Scale(domain=POINT_KINDS, range=["circle", "diamond"]))
    # a line per run and its markers, as the scaling charts draw them: hollow where provisional
    layers = _layers(y, color_scale(colors), tooltip, shape=shape, x=x, capacity=False)
    return single_panel(alt.layer(*layers, data=df), PREFILL_HEIGHT,
                        "Prefill rate against prompt length, one user", PREFILL_NOTE)


# Registered with the charts of charts.py on import (chart_writer imports this module), drawn from
# its row query over a Part's runs.
charts.CHARTS["prefill_chart"] = prefill_chart
charts.CHART_ROWS["prefill_chart"] = "part_prefill_points"

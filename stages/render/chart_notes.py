"""What a scaling chart notes about its points: the marker words of a point's tooltip (provisional,
capacity-limited, the tool's own summary, where its TPOT came from) and the lines under a chart's
title that say why points are missing or where figures came from (charts.py draws them).
"""
from __future__ import annotations

import pandas as pd

NO_TTFT_NOTE = "Not drawn: points with no TTFT (every request failed or came from the prefix cache)."
NO_DECODE_NOTE = ("Not drawn: points with no decode speed (no request completed, or no time per "
                  "output token in the result file: see pareto_left_out).")
SUMMARY_NOTE = ("Marked tool summary: the benchmark tool's own percentiles as its result file holds "
                "them (no per-request timings to compute them from).")
SUMMARY = "tool summary"


def markers(provisional: bool, limited: bool, summary: bool, tpot_from: str | None) -> str:
    """A point's note: provisional, capacity-limited, its figures the tool's summary, or, its
    other figures its requests', where its TPOT alone comes from (TPOT_NOTES)."""
    words = [w for w, on in (("provisional", provisional), ("capacity-limited", limited), (SUMMARY, summary)) if on]
    if not summary and tpot_from in TPOT_NOTES:
        words.append(TPOT_NOTES[tpot_from][0])
    return ", ".join(words) or "-"


def whole_summary(df: pd.DataFrame) -> pd.Series:
    """Rows whose figures are all the benchmark tool's own summary (figures_from)."""
    if "figures_from" not in df.columns:
        return pd.Series(False, index=df.index)
    return df["figures_from"] == SUMMARY


def summary_note(df: pd.DataFrame, note: list[str]) -> list[str]:
    """The note, saying so when any point's figures are the benchmark tool's own summary."""
    if whole_summary(df).any():
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


def tpot_note(df: pd.DataFrame, note: list[str]) -> list[str]:
    """The note, saying where the decode speeds come from where it is not each request's latency
    (a point whose figures are all the tool's summary is said so by SUMMARY_NOTE already)."""
    if "tpot_from" not in df.columns:
        return note
    found = set(df.loc[~whole_summary(df), "tpot_from"].dropna())
    return note + [TPOT_NOTES[k][1] for k in sorted(found) if k in TPOT_NOTES]

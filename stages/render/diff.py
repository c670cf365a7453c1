"""`campaign diff`: two run sets side by side, point by point, with what got better or worse.

A side is named by a run set from params (`run_sets`), a spec, a run (its run id), an image (full
name or bare tag), or a git revision (the public tables as they were then, read through DVC from data/derived).
Agents workloads (table agent_runs, where a side has it) are compared like benchmark points, with
their session count as the concurrency. Points are matched on model, layout and context (those that tell the two sides apart are left
out of the match), workload and concurrency. Each metric row carries both values, the change and
a mark: better, worse, same (within the tolerance), new failure, fixed, not comparable (a setting
that changes the meaning differs: max model length or KV cache dtype), no TTFT (a side's point
has no TTFT: every request failed or came from the prefix cache), only in base / only in head, and
a note naming the side a caution applies to (capacity-limited, no TTFT, provisional).

Better, worse and same come from a confidence interval of the change (stages/render/diff_stats.py):
TTFT and TPOT from the per-request samples of each side (bench_requests, or turn_requests for the
agents workloads), the repeats of a point pooled; output throughput, one value per repeat, from
those values. A metric whose interval crosses the tolerance, or whose side has too few samples, is
unclear. Settings: params.yaml `diff:` (confidence, resamples, seed, minimum samples).
"""
from __future__ import annotations

import csv
import io
import json
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import duckdb

from stages.core.config import CampaignError, Paths
from stages.render import diff_stats
from stages.core import run_sets as core_run_sets
from stages.render import run_sets as run_set_lib
from stages.render.diff_sides import (Side, _point_key, _rows, _sql, is_run, side_points, side_samples,
                                      tables_at_rev)

KEY_ATTRS = ("model", "layout", "ctx_label")


@dataclass(frozen=True)
class Result:
    base: str
    head: str
    key_attrs: list[str]
    points: list[dict]
    launches: list[dict]
    confidence: float = 0.95
    repeated_points: int = 0    # points of either side that ran more than once (pooled here)


def is_git_rev(root: Path, token: str) -> bool:
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{token}^{{commit}}"],
                         cwd=root, capture_output=True, text=True)
    return out.returncode == 0


def resolve(token: str, *, params: dict, paths: Paths, current: duckdb.DuckDBPyConnection) -> Side:
    run_sets = params.get("run_sets") or {}
    specs = params.get("specs") or {}
    if token in run_sets:
        rs = core_run_sets.definition(token, run_sets, "params.yaml run_sets")
        return Side(token, run_set_lib.select(current, rs, current_only=True), "current", current)
    if token in specs:
        return Side(token, run_set_lib.select(current, {"specs": [token]}, current_only=True),
                    "current", current)
    if is_run(current, token):
        return Side(token, [token], "current", current)
    by_image = run_set_lib.select(current, {"image": token}, current_only=True)
    if by_image:
        return Side(token, by_image, "current", current)
    if is_git_rev(paths.root, token):
        db = tables_at_rev(paths.root, paths, token)
        ids = [r[0] for r in db.execute("select run_id from runs where is_current order by run_id").fetchall()]
        return Side(token, ids, token, db)
    known = ", ".join(list(run_sets) + list(specs))
    raise CampaignError(f"{token!r} is not a run set, spec, run, image or git revision (known: {known})")


def found_pairs(db: duckdb.DuckDBPyConnection) -> list[dict]:
    """The pairs of runs a campaign holds without anyone listing them: a setup under two images,
    a failed launch and the relaunch that took its place (sql/diff/found_pairs.sql)."""
    return _rows(db.execute(_sql("found_pairs")))


# metric -> (sample column, statistic) for the metrics compared from per-request samples; the
# per-point ones (one value per repeat) are compared by the mean of their repeats
REQUEST_METRICS = {"ttft_median_s": ("ttft_s", "median"), "ttft_p90_s": ("ttft_s", "p90"),
                   "tpot_median_ms": ("tpot_ms", "median")}
REPEAT_METRICS = ("output_tok_s",)
INTERVAL_MARKS = ("better", "worse", "same")


def apply_intervals(points: list[dict], samples: dict[str, dict], *, tolerance_pct: float,
                    settings: diff_stats.Settings) -> None:
    """Replace the fixed-tolerance better / worse / same of each metric row by the mark of its
    interval, and attach the interval, the samples a side and each side's sample summary."""
    for r in points:
        r.update(ci_low_pct=None, ci_high_pct=None, n_base=None, n_head=None,
                 base_samples=None, head_samples=None)
        metric = r["metric"]
        if metric in REQUEST_METRICS:
            column, statistic = REQUEST_METRICS[metric]
            minimum = settings.min_samples_p90 if statistic == "p90" else settings.min_samples
            unit = "requests"
        elif metric in REPEAT_METRICS:
            column, statistic = metric, "mean"
            minimum, unit = settings.min_repeats, "repeats"
        else:
            continue
        key = _point_key(r)
        b = samples["base"].get(key, {}).get(column, [])
        h = samples["head"].get(key, {}).get(column, [])
        r["base_samples"] = diff_stats.sample_summary(b) if r["base_run_id"] else None
        r["head_samples"] = diff_stats.sample_summary(h) if r["head_run_id"] else None
        if r["mark"] not in INTERVAL_MARKS:
            continue
        iv = diff_stats.compare_samples(b, h, statistic=statistic, better_when=r["better_when"],
                                        tolerance_pct=tolerance_pct, settings=settings, minimum=minimum)
        r.update(ci_low_pct=iv.low_pct, ci_high_pct=iv.high_pct, n_base=iv.n_base, n_head=iv.n_head,
                 mark=iv.mark)
        if iv.mark == "unclear" and iv.low_pct is None:
            why = f"too few {unit} (base {iv.n_base}, head {iv.n_head}; {minimum} a side needed)"
            r["note"] = f"{r['note']}, {why}" if r["note"] else why


def compare(base: Side, head: Side, *, tolerance_pct: float = 5.0,
            stats: diff_stats.Settings | None = None) -> Result:
    if not base.run_ids:
        raise CampaignError(f"base {base.label!r} selects no runs")
    if not head.run_ids:
        raise CampaignError(f"head {head.label!r} selects no runs")
    work = duckdb.connect()
    point_rows = {s: side_points(side) for s, side in (("base", base), ("head", head))}
    launch_rows = {s: _rows(side.db.execute(_sql("side_launches"), {"run_ids": side.run_ids}))
                   for s, side in (("base", base), ("head", head))}
    key_attrs = match_attributes(launch_rows["base"], launch_rows["head"])
    for name, rows_by_side in (("side_points", point_rows), ("side_launches", launch_rows)):
        rows = [{**r, "side": s, "match_key": " / ".join(str(r[a]) for a in key_attrs) or "all"}
                for s, rows in rows_by_side.items() for r in rows]
        _load(work, name, rows)
    params = {"tolerance_pct": tolerance_pct}
    points = _rows(work.execute(_sql("points"), params))
    launches = _rows(work.execute(_sql("launches"), params))
    keyed = {s: [{**r, "match_key": " / ".join(str(r[a]) for a in key_attrs) or "all"}
                 for r in point_rows[s]] for s in point_rows}
    samples = {s: side_samples(side, keyed[s]) for s, side in (("base", base), ("head", head))}
    stats = stats or diff_stats.Settings()
    apply_intervals(points, samples, tolerance_pct=tolerance_pct, settings=stats)
    return Result(base.label, head.label, key_attrs, points, launches,
                  stats.confidence,
                  repeated_points=sum(repeated_points(rows) for rows in point_rows.values()))


def repeated_points(points: list[dict]) -> int:
    """How many of a side's points (side_points) ran more than once in their run (repeats)."""
    runs_of = Counter((r["point_table"], r["run_id"], r["workload"], r["concurrency"]) for r in points)
    return sum(1 for n in runs_of.values() if n > 1)


def match_attributes(base: list[dict], head: list[dict]) -> list[str]:
    """Attributes that identify a point across sides. One that has a single value on each side
    (and differs) is what tells the sides apart, so matching on it would match nothing."""
    keep = []
    for attr in KEY_ATTRS:
        b = {r[attr] for r in base}
        h = {r[attr] for r in head}
        if len(b) == 1 and len(h) == 1 and b != h:
            continue
        keep.append(attr)
    return keep


def _load(db: duckdb.DuckDBPyConnection, name: str, rows: list[dict]) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)  # noqa: F841  (read by DuckDB by name)
    db.execute(f"create table {name} as select * from frame")


# ---------------------------------------------------------------- output

POINT_COLS = ("match_key", "workload", "concurrency", "metric", "base_value", "head_value",
              "change_pct", "interval", "n", "mark", "note")
LAUNCH_COLS = ("match_key", "item", "base_value", "head_value", "change_pct", "mark", "note")
SUMMARY_MARKS = ("better", "worse", "unclear", "same")
SAMPLE_KEYS = ("base_samples", "head_samples")


def cell_text(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _pct(v) -> str:
    return "-" if v is None else f"{v:+.1f}%"


def interval_text(row: dict) -> str:
    lo, hi = row.get("ci_low_pct"), row.get("ci_high_pct")
    return "-" if lo is None or hi is None else f"[{lo:+.1f}%, {hi:+.1f}%]"


def n_text(row: dict) -> str:
    nb, nh = row.get("n_base"), row.get("n_head")
    return "-" if nb is None and nh is None else f"{cell_text(nb)} / {cell_text(nh)}"


def _cells(row: dict, cols) -> list[str]:
    out = []
    for c in cols:
        if c == "change_pct":
            out.append(_pct(row[c]))
        elif c == "interval":
            out.append(interval_text(row))
        elif c == "n":
            out.append(n_text(row))
        else:
            out.append(cell_text(row[c]))
    return out


def summary(result: Result) -> list[dict]:
    """Marks of the benchmark points counted by workload: better, worse, unclear, same, other."""
    out: dict[str, dict] = {}
    for r in result.points:
        counts = out.setdefault(r["workload"], {"workload": r["workload"],
                                                **{m: 0 for m in SUMMARY_MARKS}, "other": 0})
        counts[r["mark"] if r["mark"] in SUMMARY_MARKS else "other"] += 1
    return list(out.values())


def summary_line(result: Result) -> str:
    rows = summary(result)
    total = {m: sum(r[m] for r in rows) for m in (*SUMMARY_MARKS, "other")}
    parts = ", ".join(f"{total[m]} {m}" for m in SUMMARY_MARKS)
    return (f"{parts} (of {sum(total.values())} compared metrics; "
            f"{result.confidence:.0%} intervals)")


def render(result: Result, fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"base": result.base, "head": result.head, "match_on": result.key_attrs,
                           "confidence": result.confidence, "summary": summary(result),
                           "launches": result.launches, "points": result.points},
                          indent=2, default=str)
    if fmt == "csv":
        out = io.StringIO()
        keys = sorted({k for r in result.points + result.launches for k in r} - set(SAMPLE_KEYS))
        w = csv.DictWriter(out, fieldnames=["table", *keys], extrasaction="ignore")
        w.writeheader()
        for r in summary(result):
            w.writerow({"table": "summary", "workload": r["workload"],
                        "mark": "; ".join(f"{r[m]} {m}" for m in (*SUMMARY_MARKS, "other"))})
        for r in result.launches:
            w.writerow({"table": "launches", **r})
        for r in result.points:
            w.writerow({"table": "points", **r})
        return out.getvalue()
    blocks = []
    srows = [[r["workload"], *(str(r[m]) for m in (*SUMMARY_MARKS, "other"))] for r in summary(result)]
    tables = [("Summary: " + summary_line(result), srows,
               ["workload", *SUMMARY_MARKS, "other"]),
              ("Launches and gates", [_cells(r, LAUNCH_COLS) for r in result.launches], list(LAUNCH_COLS)),
              ("Benchmark points", [_cells(r, POINT_COLS) for r in result.points], list(POINT_COLS))]
    for title, body, cols in tables:
        heads = [c.replace("_", " ") for c in cols]
        if "base value" in heads:
            heads[heads.index("base value")] = f"base ({result.base})"
            heads[heads.index("head value")] = f"head ({result.head})"
        if "n" in heads:
            heads[heads.index("n")] = "n base / head"
        if fmt == "markdown":
            lines = [f"### {title}", "", "| " + " | ".join(heads) + " |",
                     "| " + " | ".join("---" for _ in heads) + " |"]
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
        else:
            widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
                      for i, h in enumerate(heads)]
            lines = [title, "  ".join(h.ljust(w) for h, w in zip(heads, widths)),
                     "  ".join("-" * w for w in widths)]
            lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
        blocks.append("\n".join(lines))
    counts = {}
    for r in result.points + result.launches:
        counts[r["mark"]] = counts.get(r["mark"], 0) + 1
    tail = "matched on " + (", ".join(result.key_attrs + ["workload", "concurrency"]))
    tail += "; " + ", ".join(f"{n} {m}" for m, n in sorted(counts.items()))
    return "\n\n".join(blocks) + "\n\n" + tail + "\n"

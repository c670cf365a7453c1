"""The ingest benchmark: a synthetic campaign, its ingest measured against `grep -c`, and a report.

Writes `<out_dir>/report.md` and `<out_dir>/report.json`. The campaign (stages.tools.synth.campaign) is written
under `<out_dir>/campaign/` and reused while its parameters match. Every ingest runs in a child
process, which samples the resident memory of itself and its worker processes.

Measured:
  - full ingest of the campaign into an empty warehouse (all files; MB/s over every byte read and
    over the server.log bytes alone), and a server-logs-only ingest of the same logs;
  - `grep -c "KV cache size"` over every server.log, same bytes, same page cache;
  - peak memory of the ingest (its process tree);
  - a no-op re-ingest (nothing changed), repeated;
  - ingest at several campaign sizes, for growth with bytes. Sizes above 1x reuse the 1x files
    through hard links under new run ids (no extra disk; the same bytes are read again);
  - the client section (stages/tools/bench/benchmark_client.py): the benchmark client's own time
    before a point's first request and after its last answer, against a stand-in server;
  - the render section (stages/tools/bench/benchmark_render.py): the node campaign at 30, 300 and 1,000
    runs (times `scale`) ingested, derived, rendered from scratch and after a one-template change.

Example:
    from stages.tools.bench import benchmark
    benchmark.run(out_dir=Path("data/bench"), scale=1.0, progress=print)
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from stages.tools.bench.benchmark_campaign import (BYTES_AT_1X, RUNS_AT_1X, Progress, campaign_params,
                                             ensure_campaign, link_campaign, tree_bytes)
from stages.tools.bench.benchmark_measure import GREP_PATTERN, measure_ingest, remove_warehouse, time_grep
from stages.tools.bench import benchmark_client, benchmark_render
from stages.tools.bench.benchmark_report import build_report, render_markdown

SCALE_POINTS = (0.1, 1.0, 10.0)


# ---------------------------------------------------------------- the benchmark

def run(*, out_dir: Path, scale: float = 1.0, seed: int = 1, repeats: int = 3,
        scale_points: tuple[float, ...] = SCALE_POINTS, keep_data: bool = True,
        runs_at_1x: int = RUNS_AT_1X, bytes_at_1x: int = BYTES_AT_1X,
        sections: tuple[str, ...] = ("ingest", "render"), render_sizes: tuple[int, ...] | None = None,
        client_model: dict[str, Any] | None = None,
        progress: Progress | None = None) -> dict[str, Any]:
    """Measure the sections asked for; write report.md and report.json under out_dir.

    `scale` sizes the ingest campaign (1.0: runs_at_1x runs, bytes_at_1x bytes: 300 runs, 5 GB);
    scale_points are multiples of it. keep_data=False removes the campaign afterwards, keeping
    the reports (warehouses and links are always removed). The render section measures
    `render_sizes` runs, by default benchmark_render.sizes_for(scale).
    """
    out_dir = Path(out_dir)
    say = progress or (lambda _line: None)
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    markdown = []
    if "ingest" in sections:
        report = _ingest(out_dir, scale=scale, seed=seed, repeats=repeats, scale_points=scale_points,
                         keep_data=keep_data, runs_at_1x=runs_at_1x, bytes_at_1x=bytes_at_1x, say=say)
        markdown.append(render_markdown(report))
    else:
        markdown.append("# Benchmark\n")
    if "render" in sections:
        report["render"] = benchmark_render.run(
            out_dir=out_dir, sizes=render_sizes or benchmark_render.sizes_for(scale), progress=say)
        markdown.append(benchmark_render.render_markdown(report["render"]))
    if "client" in sections and client_model is not None:
        report["client"] = benchmark_client.run(model=client_model, progress=say)
        markdown.append(benchmark_client.render_markdown(report["client"]))
    (out_dir / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out_dir / "report.md").write_text("\n".join(markdown))
    say(f"bench: wrote {out_dir / 'report.md'}")
    return report


def _ingest(out_dir: Path, *, scale: float, seed: int, repeats: int,
            scale_points: tuple[float, ...], keep_data: bool, runs_at_1x: int, bytes_at_1x: int,
            say: Progress) -> dict[str, Any]:
    """The ingest section: generate (or reuse) the campaign, measure, the report's dict."""
    load_before = os.getloadavg()
    params = campaign_params(scale, seed, runs_at_1x, bytes_at_1x)
    campaign = ensure_campaign(out_dir, params, say)
    runs_dir = out_dir / "campaign" / "runs"
    work = out_dir / "work"
    work.mkdir(exist_ok=True)
    warehouse = work / "warehouse.duckdb"
    log_files = sorted(runs_dir.glob("*/server.log"))
    _, log_bytes = tree_bytes(runs_dir, "server.log")
    files, all_bytes = tree_bytes(runs_dir)

    full = measure_ingest(label="full campaign", runs_dir=runs_dir, warehouse=warehouse,
                          root=out_dir, say=say)
    noop = measure_ingest(label="no-op re-ingest", runs_dir=runs_dir, warehouse=warehouse,
                          root=out_dir, repeats=repeats, fresh=False, say=say)
    errors = _errors(warehouse)

    logs_dir = work / "logs-only"
    link_campaign(runs_dir, logs_dir, campaign["run_ids"], 1, only=("server.log", "cmd.sh"))
    logs_only = measure_ingest(label="server logs only", runs_dir=logs_dir, warehouse=warehouse,
                               root=out_dir, say=say)
    shutil.rmtree(logs_dir)

    say(f"bench: grep -c {GREP_PATTERN!r} over {len(log_files)} server.log files, x{repeats}")
    grep_s = time_grep(log_files, repeats)

    points = []
    for factor in scale_points:
        points.append(_scale_point(factor, campaign, runs_dir, work, out_dir, full, say))
    remove_warehouse(warehouse)
    shutil.rmtree(work, ignore_errors=True)

    report = build_report(params=params, campaign=campaign, files=files, all_bytes=all_bytes,
                     log_bytes=log_bytes, log_files=len(log_files), full=full, noop=noop,
                     logs_only=logs_only, grep_s=grep_s, points=points, errors=errors,
                     load_before=load_before, repeats=repeats)
    if not keep_data:
        shutil.rmtree(out_dir / "campaign", ignore_errors=True)
    return report


def _errors(warehouse: Path) -> list[str]:
    import duckdb

    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return [f"{f}:{line}: {reason}" for f, line, reason in con.execute(
            "select source_file, source_line, reason from ingest_errors order by 1, 2").fetchall()]
    finally:
        con.close()


def _scale_point(factor: float, campaign: dict, runs_dir: Path, work: Path, out_dir: Path,
                 full: dict, say: Progress) -> dict[str, Any]:
    """Ingest at `factor` times the campaign: a prefix of its runs below 1, whole copies above."""
    run_ids = campaign["run_ids"]
    if factor == 1.0:
        measured = full
        files, size = tree_bytes(runs_dir)
        how = "the campaign itself (the full ingest above)"
        folders = len(run_ids)
    else:
        target = work / f"scale-{factor:g}"
        if factor < 1:
            chosen, copies = run_ids[: max(1, round(len(run_ids) * factor))], 1
            how = f"the first {len(chosen)} runs of the campaign (hard links)"
        else:
            chosen, copies = run_ids, round(factor)
            how = f"{copies} copies of the campaign under new run ids (hard links)"
        link_campaign(runs_dir, target, chosen, copies)
        files, size = tree_bytes(target)
        folders = len(chosen) * copies
        measured = measure_ingest(label=f"{factor:g}x", runs_dir=target,
                                  warehouse=work / f"scale-{factor:g}.duckdb", root=out_dir, say=say)
        remove_warehouse(work / f"scale-{factor:g}.duckdb")
        shutil.rmtree(target)
    seconds = measured["runs"][0]["seconds"]
    return {"factor": factor, "how": how, "folders": folders, "files": files, "bytes": size,
            "seconds": seconds, "mb_s": size / 1e6 / seconds, "s_per_gb": seconds / (size / 1e9),
            "peak_rss": measured["tree_peak_rss"]}

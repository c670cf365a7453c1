"""The render benchmark: the node campaign at scale (stages/tools/synth/synth_node_scale.py), ingested,
derived and rendered, each stage timed as the `campaign` command a team runs.

For each size (runs): ingest (the yardstick), derive, a render from scratch (no docs, site or
chart cache), then a render after a one-template change (one Part's template gains a line; the
chart cache is kept). Each command runs in a child process whose tree's resident memory is sampled.

Example:
    from stages.tools.bench import benchmark_render
    result = benchmark_render.run(out_dir=Path("data/bench"), sizes=(30, 300), progress=print)
    print(benchmark_render.render_markdown(result))
"""
from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from stages.core.config import CampaignError
from stages.tools.synth import synth_node_scale
from stages.tools.bench.benchmark_campaign import Progress, tree_bytes
from stages.tools.bench.benchmark_measure import SAMPLE_S, _tree_rss

SIZES = (30, 300, 1000)
TARGETS = {"render_s_at_300": 45.0, "again_s_at_300": 5.0, "render_peak_gib": 1.5, "site_mb": 80.0,
           "render_growth": 1.0}   # render time's growth over the runs' growth, at most linear
PHASES_SHOWN = 8   # the largest phases of each render, in the report's phase table
CHANGE_LINE = "\nA line added to measure a render after a one-template change.\n"


def sizes_for(scale: float) -> tuple[int, ...]:
    """The benchmark's sizes at `scale` (1.0: 30, 300 and 1,000 runs), at least one run each."""
    return tuple(sorted({max(1, round(n * scale)) for n in SIZES}))


def timed_command(args: list[str], root: Path, label: str, say: Progress) -> dict[str, Any]:
    """`campaign ARGS --root root` in a child process: wall seconds, CPU seconds (user and system,
    its process tree: steadier than wall time on a shared machine), peak memory of its process
    tree, and its last line of output."""
    say(f"bench: {label}")
    root = root.resolve()
    cmd = [sys.executable, "-m", "stages.cli", *args, "--root", str(root)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    logs = [root / f".bench-{args[0]}.{kind}" for kind in ("out", "err")]   # not pipes: no deadlock
    with logs[0].open("w") as out_fh, logs[1].open("w") as err_fh:
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out_fh, stderr=err_fh)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(SAMPLE_S)
        seconds = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    out, err = (path.read_text() for path in logs)
    if proc.returncode != 0:
        raise CampaignError(f"bench: {label} failed: {' | '.join((err or out).strip().splitlines()[-2:])}")
    return {"seconds": seconds, "cpu_s": cpu, "peak_rss": peak,
            "out": out.strip().splitlines()[-1] if out.strip() else ""}


def timed_render(root: Path, label: str, say: Progress) -> dict[str, Any]:
    """`campaign render`, timed as timed_command, with the seconds of each of its phases."""
    timings = root.resolve() / ".bench-render-timings.json"
    result = timed_command(["render", "--timings", str(timings)], root, label, say)
    result["phases"] = json.loads(timings.read_text())
    timings.unlink()
    return result


def _preview_timing(root: Path, template: Path, label: str, say: Progress) -> dict[str, Any]:
    """The preview's render after a one-template change (stages/tools/bench/benchmark_preview.py), in a
    child process: its seconds and phases, as the preview's terminal line reports them."""
    say(f"bench: {label}")
    out = root.resolve() / ".bench-preview.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.run([sys.executable, "-m", "stages.tools.bench.benchmark_preview", str(root.resolve()),
                           str(template.resolve()), str(out)], cwd=root, env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise CampaignError(f"bench: {label} failed: {' | '.join(proc.stderr.strip().splitlines()[-2:])}")
    result = json.loads(out.read_text())
    out.unlink()
    return result


def _count(summary: str, key: str) -> int | None:
    found = re.search(rf"\b{key}=(\d+)", summary)
    return int(found.group(1)) if found else None


def measure_size(runs: int, out_dir: Path, say: Progress) -> dict[str, Any]:
    """One size: the scaled root written afresh, then ingest, derive, render twice."""
    root = out_dir / "render" / f"root-{runs}"
    if root.exists():
        shutil.rmtree(root)
    started = time.perf_counter()
    made = synth_node_scale.write(out_root=root, runs=runs, root=Path(__file__).resolve().parents[3])
    write_s = time.perf_counter() - started
    say(f"bench: render at {runs} runs ({made['groups']} Parts)")
    ingest = timed_command(["ingest"], root, f"ingest of {runs} runs", say)
    derive = timed_command(["derive"], root, f"derive of {runs} runs", say)
    fresh = timed_render(root, f"render of {runs} runs from scratch", say)
    files, size = tree_bytes(root / "data" / "site")
    template = root / "site" / "templates" / made["parts"][0]
    template.write_text(template.read_text() + CHANGE_LINE)
    again = timed_render(root, f"render of {runs} runs after a one-template change", say)
    warm = _preview_timing(root, template, f"the preview's render of {runs} runs after a one-template change", say)
    audit_files, audit_bytes = tree_bytes(root / "data" / "site" / "audit")
    chart_files, chart_bytes = tree_bytes(root / "data" / "site" / "assets" / "charts")
    row = {
        "runs": made["runs"], "parts": made["groups"], "write_s": write_s,
        "ingest_s": ingest["seconds"], "ingest_peak_rss": ingest["peak_rss"],
        "derive_s": derive["seconds"], "derive_peak_rss": derive["peak_rss"],
        "render_s": fresh["seconds"], "render_peak_rss": fresh["peak_rss"],
        "render_cpu_s": fresh["cpu_s"], "render_phases": fresh["phases"],
        "again_cpu_s": again["cpu_s"], "again_phases": again["phases"],
        "again_pages_reused": _count(again["out"], "pages_reused"),
        "preview_s": warm["seconds"], "preview_phases": warm["phases"],
        "site_files": files, "site_bytes": size, "audit_files": audit_files,
        "audit_bytes": audit_bytes, "chart_files": chart_files, "chart_bytes": chart_bytes,
        "charts_drawn": _count(fresh["out"], "charts_drawn"),
        "charts": len(re.findall(r"assets/charts/", fresh["out"])),
        "facts": _count(fresh["out"], "facts"),
        "again_s": again["seconds"], "again_peak_rss": again["peak_rss"],
        "again_drawn": _count(again["out"], "charts_drawn"),
        "again_reused": _count(again["out"], "charts_reused"),
        "again_specs_reused": _count(again["out"], "chart_specs_reused"),
    }
    shutil.rmtree(root)
    return row


def run(*, out_dir: Path, sizes: tuple[int, ...] = SIZES, progress: Progress | None = None
        ) -> dict[str, Any]:
    """Every size measured; the growth from each size to the next; checks against TARGETS."""
    say = progress or (lambda _line: None)
    rows = [measure_size(n, Path(out_dir), say) for n in sizes]
    growth = [{"from": a["runs"], "to": b["runs"], "runs_x": b["runs"] / a["runs"],
               "render_x": b["render_s"] / a["render_s"], "ingest_x": b["ingest_s"] / a["ingest_s"],
               "site_x": b["site_bytes"] / a["site_bytes"]} for a, b in zip(rows, rows[1:])]
    at_300 = next((r for r in rows if r["runs"] == 300), None)
    checks = {
        "render_s_at_300": (at_300["render_s"] if at_300 else None, TARGETS["render_s_at_300"]),
        "again_s_at_300": (at_300["again_s"] if at_300 else None, TARGETS["again_s_at_300"]),
        "preview_s_at_300": (at_300["preview_s"] if at_300 else None, TARGETS["again_s_at_300"]),
        "render_peak_gib": (at_300["render_peak_rss"] / 2**30 if at_300 else None, TARGETS["render_peak_gib"]),
        "site_mb": (at_300["site_bytes"] / 1e6 if at_300 else None, TARGETS["site_mb"]),
        "render_growth_overall": (rows[-1]["render_s"] / rows[0]["render_s"] / (rows[-1]["runs"] / rows[0]["runs"])
                                  if len(rows) > 1 else None, TARGETS["render_growth"]),
        "render_growth": (max((g["render_x"] / g["runs_x"] for g in growth), default=None),
                          TARGETS["render_growth"]),
    }
    passed = {k: (None if v is None else v <= t) for k, (v, t) in checks.items()}
    return {"sizes": rows, "growth": growth, "checks": checks, "passed": passed,
            "cpus": os.cpu_count()}


def phase_table(sizes: list[dict[str, Any]]) -> list[str]:
    """Where each render's time went: its largest phases (stages/render/timing.py), wall seconds,
    then CPU seconds of the whole command (Python's start included)."""
    lines = ["Where the time went (wall seconds by phase; `other`: in no phase; the command's own "
             "start, imports included, is its wall time less the phases):", "",
             "| runs | render | wall | CPU | largest phases |", "| --- | --- | --- | --- | --- |"]
    for s in sizes:
        for label, key, wall, cpu in (("from scratch", "render_phases", s["render_s"], s.get("render_cpu_s")),
                                      ("one-template change", "again_phases", s["again_s"], s.get("again_cpu_s")),
                                      ("one-template change, preview", "preview_phases", s.get("preview_s"), None)):
            if wall is None:
                continue
            phases = s.get(key) or {}
            top = sorted(phases.items(), key=lambda kv: -kv[1])[:PHASES_SHOWN]
            shown = ", ".join(f"{name} {sec:.1f} s" for name, sec in top)
            lines.append(f"| {s['runs']:,} | {label} | {wall:.1f} s | "
                         f"{'-' if cpu is None else f'{cpu:.1f} s'} | {shown} |")
    return lines


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def render_markdown(r: dict[str, Any]) -> str:
    """The report's render section."""
    lines = [
        "## Render at campaign scale",
        "",
        f"The scripted node campaign repeated under new model names (stages/tools/synth/synth_node_scale.py), "
        f"one Part per group of four models; each stage is its `campaign` command in a child process "
        f"({r['cpus']} CPUs), timed wall to wall (Python start included), peak memory the largest "
        f"sum of VmRSS over the process tree (mkdocs included), sampled every {SAMPLE_S * 1000:.0f} ms.",
        "",
        "Charts are drawn by the reader's browser from their specs; static images are drawn only "
        "where params.yaml `charts.static_images` asks (the campaign here does not).",
        "",
        "| runs | Parts | ingest | derive | render from scratch | render / ingest | peak memory "
        "| site files | site size | of which audit | of which charts | charts drawn "
        "| render after a one-template change | charts drawn / reused | chart specs reused |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in r["sizes"]:
        lines.append(
            f"| {s['runs']:,} | {s['parts']} | {s['ingest_s']:.1f} s | {s['derive_s']:.1f} s "
            f"| {s['render_s']:.1f} s | x{s['render_s'] / s['ingest_s']:.1f} "
            f"| {_gib(s['render_peak_rss'])} | {s['site_files']:,} "
            f"| {s['site_bytes'] / 1e6:,.0f} MB | {s['audit_files']:,} files, {s['audit_bytes'] / 1e6:,.0f} MB "
            f"| {s['chart_files']:,} files, {s['chart_bytes'] / 1e6:,.0f} MB | {s['charts_drawn']} "
            f"| {s['again_s']:.1f} s | {s['again_drawn']} / {s['again_reused']} "
            f"| {s.get('again_specs_reused')} of {s['charts']} |")
    if r["growth"]:
        lines += ["", "| growth | runs | ingest time | render time | site size |", "| --- | --- | --- | --- | --- |"]
        for g in r["growth"]:
            lines.append(f"| {g['from']:,} to {g['to']:,} | x{g['runs_x']:.1f} | x{g['ingest_x']:.1f} "
                         f"| x{g['render_x']:.1f} | x{g['site_x']:.1f} |")
    lines += ["", *phase_table(r["sizes"])]
    lines += ["", "| target | value | bar | result |", "| --- | --- | --- | --- |"]
    names = {"render_s_at_300": ("render from scratch at 300 runs", "s"),
             "again_s_at_300": ("render after a one-template change at 300 runs", "s"),
             "preview_s_at_300": ("preview's render after a one-template change at 300 runs", "s"),
             "render_peak_gib": ("peak memory of a render at 300 runs", "GiB"),
             "site_mb": ("site at 300 runs", "MB"),
             "render_growth": ("render time's growth over the runs' growth, largest step", "x"),
             "render_growth_overall": ("render time's growth over the runs' growth, smallest to largest",
                                       "x")}
    for key, (value, bar) in r["checks"].items():
        label, unit = names[key]
        shown = "not measured" if value is None else f"{value:,.1f} {unit}"
        result = "not measured" if r["passed"][key] is None else "pass" if r["passed"][key] else "FAIL"
        lines.append(f"| {label} | {shown} | <= {bar:,.1f} {unit} | {result} |")
    return "\n".join(lines) + "\n"

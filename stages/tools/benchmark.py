"""The ingest benchmark: a synthetic campaign, its ingest measured against `grep -c`, and a report.

Writes `<out_dir>/report.md` and `<out_dir>/report.json`. The campaign (stages.tools.synth) is written
under `<out_dir>/campaign/` and reused while its parameters match. Every ingest runs in a child
process, which samples the resident memory of itself and its worker processes.

Measured:
  - full ingest of the campaign into an empty warehouse (all files; MB/s over every byte read and
    over the server.log bytes alone), and a server-logs-only ingest of the same logs;
  - `grep -c "KV cache size"` over every server.log, same bytes, same page cache;
  - peak memory of the ingest (its process tree);
  - a no-op re-ingest (nothing changed), repeated;
  - ingest at several campaign sizes, for growth with bytes. Sizes above 1x reuse the 1x files
    through hard links under new run ids (no extra disk; the same bytes are read again).

Example:
    from stages.tools import benchmark
    benchmark.run(out_dir=Path("data/bench"), scale=1.0, progress=print)
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from stages.tools import synth
from stages.core.config import CampaignError

RUNS_AT_1X = 300
BYTES_AT_1X = 5 * 10**9
GREP_PATTERN = "KV cache size"
TARGETS = {"log_mb_s": 150.0, "peak_rss_gib": 1.5, "noop_s": 2.0, "growth_spread": 0.25}
SCALE_POINTS = (0.1, 1.0, 10.0)
SAMPLE_S = 0.05

Progress = Callable[[str], None]


# ---------------------------------------------------------------- the campaign on disk

def campaign_params(scale: float, seed: int, runs_at_1x: int = RUNS_AT_1X,
                    bytes_at_1x: int = BYTES_AT_1X) -> dict[str, Any]:
    return {"synth_version": synth.SYNTH_VERSION, "runs": max(1, round(runs_at_1x * scale)),
            "total_bytes": int(bytes_at_1x * scale), "seed": seed}


def ensure_campaign(out_dir: Path, params: dict[str, Any], say: Progress) -> dict[str, Any]:
    """The synthetic campaign under out_dir/campaign, written unless one with `params` is there."""
    home = out_dir / "campaign"
    manifest = home / "synth.json"
    if manifest.is_file():
        written = json.loads(manifest.read_text())
        if {k: written.get(k) for k in params} == params and (home / "runs").is_dir():
            say(f"bench: reusing the campaign in {home} ({written['total_bytes'] / 1e9:.2f} GB)")
            return written
    if home.exists():
        shutil.rmtree(home)
    say(f"bench: writing a synthetic campaign of {params['runs']} runs, "
        f"about {params['total_bytes'] / 1e9:.1f} GB")
    started = time.perf_counter()
    written = synth.run(out_dir=home / "runs", runs=params["runs"], total_bytes=params["total_bytes"],
                        seed=params["seed"], progress=say)
    written.update(params, write_s=round(time.perf_counter() - started, 1))
    manifest.write_text(json.dumps(written, indent=1))
    return written


def _shifted(run_id: str, copy: int) -> str:
    """The run id of the `copy`-th copy of a run: its stamp moved by 11 days a copy."""
    head, _, stamp = run_id.rpartition("__")
    when = datetime.strptime(f"2001{stamp}", "%Y%m%d-%H%M%S") + timedelta(days=11 * copy)
    return f"{head}__{when:%m%d-%H%M%S}"


def link_campaign(source: Path, target: Path, run_ids: list[str], copies: int,
                  only: tuple[str, ...] | None = None) -> None:
    """Hard links to the files of `run_ids` under `target`, `copies` times with new run ids;
    `only` keeps the named files of each folder."""
    if target.exists():
        shutil.rmtree(target)
    for copy in range(copies):
        for run_id in run_ids:
            src = source / run_id
            dst = target / (run_id if copy == 0 else _shifted(run_id, copy))
            for path in sorted(src.rglob("*")):
                if path.is_dir() or (only and path.name not in only):
                    continue
                out = dst / path.relative_to(src)
                out.parent.mkdir(parents=True, exist_ok=True)
                os.link(path, out)


def tree_bytes(runs_dir: Path, name: str | None = None) -> tuple[int, int]:
    """(files, bytes) under runs_dir, or of the files called `name` only."""
    files = total = 0
    for dirpath, _, filenames in os.walk(runs_dir):
        for f in filenames:
            if name is None or f == name:
                files += 1
                total += os.stat(os.path.join(dirpath, f)).st_size
    return files, total


# ---------------------------------------------------------------- measuring in a child process

def _tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants (shared pages counted in each)."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def _vm_hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def child_main(argv: list[str]) -> None:
    """Run ingest `repeats` times (the first on what is there, the others as re-runs) and print
    one JSON line with the timings and the memory of the process tree."""
    import resource

    from stages.ingest import stage as ingest

    args = json.loads(argv[0])
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_rss(os.getpid()))
            stop.wait(SAMPLE_S)

    total = args["plan_folders"]
    step = max(1, total // 10)

    def say(line: str) -> None:
        parts = line.split()
        if len(parts) > 1 and "/" in parts[1] and parts[1].split("/")[0].isdigit():
            done = int(parts[1].split("/")[0])
            if done % step == 0 or done == total:
                print(f"bench:   {args['label']}: {done}/{total} folders", file=sys.stderr, flush=True)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    runs = []
    for _ in range(args["repeats"]):
        started = time.perf_counter()
        summary = ingest.run(runs_dir=Path(args["runs_dir"]), warehouse=Path(args["warehouse"]),
                             root=Path(args["root"]), progress=say)
        runs.append({"seconds": time.perf_counter() - started, "runs_read": summary["runs_read"],
                     "runs_skipped": summary["runs_skipped"], "bytes_read": summary["bytes_read"],
                     "errors": summary["errors"], "workers": summary["workers"],
                     "rows": sum(summary["rows"].values())})
    stop.set()
    watcher.join()
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"runs": runs, "tree_peak_rss": peak, "main_hwm": _vm_hwm(),
                      "worker_maxrss": children}))


def measure_ingest(*, label: str, runs_dir: Path, warehouse: Path, root: Path, repeats: int = 1,
                   fresh: bool = True, say: Progress) -> dict[str, Any]:
    """Ingest in a child process; fresh: into an empty warehouse."""
    if fresh:
        _remove_warehouse(warehouse)
    folders = sum(1 for p in runs_dir.iterdir() if p.is_dir())
    args = {"label": label, "runs_dir": str(runs_dir), "warehouse": str(warehouse), "root": str(root),
            "repeats": repeats, "plan_folders": folders}
    say(f"bench: ingest {label} ({folders} folders{', x' + str(repeats) if repeats > 1 else ''})")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "stages.tools.benchmark", "--child", json.dumps(args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    tail: list[str] = []
    for line in proc.stderr:
        line = line.rstrip()
        if line.startswith("bench:"):
            say(line)
        else:
            tail = (tail + [line])[-20:]
    out = proc.stdout.read()
    if proc.wait() != 0:
        raise CampaignError(f"bench: the {label} ingest failed: {' | '.join(tail[-3:])}")
    result = json.loads(out.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - started
    return result


def _remove_warehouse(warehouse: Path) -> None:
    for path in (warehouse, warehouse.with_name(warehouse.name + ".wal")):
        path.unlink(missing_ok=True)


def time_grep(files: list[Path], repeats: int) -> list[float]:
    """Seconds of `grep -c PATTERN` over `files`, one run per repeat."""
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(["grep", "-c", GREP_PATTERN, *map(str, files)], stdout=subprocess.DEVNULL,
                       check=False)
        out.append(time.perf_counter() - started)
    return out


# ---------------------------------------------------------------- the benchmark

def run(*, out_dir: Path, scale: float = 1.0, seed: int = 1, repeats: int = 3,
        scale_points: tuple[float, ...] = SCALE_POINTS, keep_data: bool = True,
        runs_at_1x: int = RUNS_AT_1X, bytes_at_1x: int = BYTES_AT_1X,
        progress: Progress | None = None) -> dict[str, Any]:
    """Generate (or reuse) the campaign, measure, write report.md and report.json under out_dir.

    `scale` sizes the campaign (1.0: runs_at_1x runs, bytes_at_1x bytes: 300 runs, 5 GB);
    scale_points are multiples of it. keep_data=False removes the campaign afterwards, keeping
    the reports (warehouses and links are always removed).
    """
    out_dir = Path(out_dir)
    say = progress or (lambda _line: None)
    out_dir.mkdir(parents=True, exist_ok=True)
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
    _remove_warehouse(warehouse)
    shutil.rmtree(work, ignore_errors=True)

    report = _report(params=params, campaign=campaign, files=files, all_bytes=all_bytes,
                     log_bytes=log_bytes, log_files=len(log_files), full=full, noop=noop,
                     logs_only=logs_only, grep_s=grep_s, points=points, errors=errors,
                     load_before=load_before, repeats=repeats)
    (out_dir / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out_dir / "report.md").write_text(render_markdown(report))
    if not keep_data:
        shutil.rmtree(out_dir / "campaign", ignore_errors=True)
    say(f"bench: wrote {out_dir / 'report.md'}")
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
        _remove_warehouse(work / f"scale-{factor:g}.duckdb")
        shutil.rmtree(target)
    seconds = measured["runs"][0]["seconds"]
    return {"factor": factor, "how": how, "folders": folders, "files": files, "bytes": size,
            "seconds": seconds, "mb_s": size / 1e6 / seconds, "s_per_gb": seconds / (size / 1e9),
            "peak_rss": measured["tree_peak_rss"]}


def _report(*, params, campaign, files, all_bytes, log_bytes, log_files, full, noop, logs_only,
            grep_s, points, errors, load_before, repeats) -> dict[str, Any]:
    full_s = full["runs"][0]["seconds"]
    logs_s = logs_only["runs"][0]["seconds"]
    grep_median = statistics.median(grep_s)
    noop_times = [r["seconds"] for r in noop["runs"]]
    per_gb = [p["s_per_gb"] for p in points]
    spread = (max(per_gb) - min(per_gb)) / statistics.median(per_gb) if per_gb else None
    largest = max(points, key=lambda p: p["bytes"]) if points else None
    figures = {
        "full_ingest_s": full_s,
        "full_ingest_mb_s": all_bytes / 1e6 / full_s,
        "log_bytes_over_full_ingest_mb_s": log_bytes / 1e6 / full_s,
        "logs_only_ingest_s": logs_s,
        "logs_only_ingest_mb_s": log_bytes / 1e6 / logs_s,
        "grep_s_median": grep_median,
        "grep_mb_s": log_bytes / 1e6 / grep_median,
        "logs_only_over_grep_time": logs_s / grep_median,
        "peak_rss_gib": full["tree_peak_rss"] / 2**30,
        "peak_rss_gib_largest_size": (largest["peak_rss"] / 2**30) if largest else None,
        "largest_size": largest["factor"] if largest else None,
        "main_hwm_gib": full["main_hwm"] / 2**30,
        "worker_maxrss_gib": full["worker_maxrss"] / 2**30,
        "noop_s_median": statistics.median(noop_times),
        "noop_s": noop_times,
        "noop_process_s": noop["process_s"] / repeats,
        "growth_spread": spread,
        "workers": full["runs"][0]["workers"],
        "rows": full["runs"][0]["rows"],
        "ingest_errors": full["runs"][0]["errors"],
    }
    checks = {
        "log_mb_s": (figures["logs_only_ingest_mb_s"], ">=", TARGETS["log_mb_s"]),
        "peak_rss_gib": (figures["peak_rss_gib"], "<", TARGETS["peak_rss_gib"]),
        "noop_s": (figures["noop_s_median"], "<", TARGETS["noop_s"]),
        "growth_spread": (spread if spread is not None else float("nan"), "<=", TARGETS["growth_spread"]),
    }
    passed = {k: (v >= t if op == ">=" else v < t if op == "<" else v <= t) for k, (v, op, t) in checks.items()}
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "load_avg_before": [round(x, 2) for x in load_before],
                    "page_cache": "warm (the files were written or read just before)"},
        "campaign": {"runs": params["runs"], "seed": params["seed"], "files": files,
                     "bytes": all_bytes, "log_files": log_files, "log_bytes": log_bytes,
                     "bytes_by_kind": campaign["bytes"], "kinds": campaign["kinds"],
                     "write_s": campaign.get("write_s")},
        "figures": figures, "targets": TARGETS, "passed": passed,
        "scale_points": points, "grep_s": grep_s, "ingest_errors": errors,
        "expected_errors": campaign["broken_files"],
    }


# ---------------------------------------------------------------- the report

def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB" if n < 1e9 else f"{n / 1e9:,.2f} GB"


def render_markdown(r: dict[str, Any]) -> str:
    f, t, ok, c, m = r["figures"], r["targets"], r["passed"], r["campaign"], r["machine"]
    mark = lambda key: "pass" if ok[key] else "FAIL"  # noqa: E731
    lines = [
        "# Ingest benchmark",
        "",
        f"{r['date']}, {m['cpus']} CPUs, Python {m['python']}, {m['platform']}; "
        f"load average before: {', '.join(map(str, m['load_avg_before']))}; page cache {m['page_cache']}.",
        "",
        f"Synthetic campaign (stages/tools/synth.py, seed {c['seed']}): {c['runs']} runs, {c['files']:,} files, "
        f"{_mb(c['bytes'])}: server logs {_mb(c['bytes_by_kind']['log'])} in {c['log_files']} files, "
        f"benchmark results {_mb(c['bytes_by_kind']['bench'])}, /metrics scrapes "
        f"{_mb(c['bytes_by_kind']['metrics'])}. Runs: {c['kinds'].get('ready', 0)} ready, "
        f"{c['kinds'].get('failed', 0)} crashed launches, {c['kinds'].get('interrupted', 0)} interrupted, "
        f"{c['kinds'].get('no_meta', 0)} without meta.json, {c['kinds'].get('docker', 0)} with docker "
        f"timestamps, {c['kinds'].get('sglang', 0)} SGLang.",
        "",
        "| measure | value | target | result |",
        "| --- | --- | --- | --- |",
        f"| ingest of the server logs alone ({_mb(c['log_bytes'])}) | {f['logs_only_ingest_mb_s']:,.0f} MB/s "
        f"({f['logs_only_ingest_s']:.1f} s) | >= {t['log_mb_s']:.0f} MB/s | {mark('log_mb_s')} |",
        f"| `grep -c \"{GREP_PATTERN}\"` over the same files (median of {len(r['grep_s'])}) | "
        f"{f['grep_mb_s']:,.0f} MB/s ({f['grep_s_median']:.2f} s) | | |",
        f"| ingest time / grep time | {f['logs_only_over_grep_time']:.1f}x | | |",
        f"| full ingest, every file ({_mb(c['bytes'])}) | {f['full_ingest_mb_s']:,.0f} MB/s "
        f"({f['full_ingest_s']:.1f} s, {f['rows']:,} rows, {f['workers']} workers) | | |",
        f"| peak memory of the full ingest (process tree, RSS sampled every {SAMPLE_S * 1000:.0f} ms) | "
        f"{f['peak_rss_gib']:.2f} GiB | < {t['peak_rss_gib']} GiB | {mark('peak_rss_gib')} |",
        f"| ... and at the largest size measured ({f['largest_size']:g}x) | "
        f"{f['peak_rss_gib_largest_size']:.2f} GiB | | |",
        f"| no-op re-ingest of {c['runs']} runs (median of {len(f['noop_s'])}) | {f['noop_s_median']:.2f} s "
        f"| < {t['noop_s']:.0f} s | {mark('noop_s')} |",
        f"| growth: spread of seconds per GB across sizes | {f['growth_spread'] * 100:.0f}% "
        f"| <= {t['growth_spread'] * 100:.0f}% | {mark('growth_spread')} |",
        "",
        "## Growth with campaign size",
        "",
        "| size | what was ingested | folders | bytes | seconds | MB/s | s per GB | peak memory |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in r["scale_points"]:
        lines.append(f"| {p['factor']:g}x | {p['how']} | {p['folders']:,} | {_mb(p['bytes'])} | "
                     f"{p['seconds']:.1f} | {p['mb_s']:,.0f} | {p['s_per_gb']:.2f} | "
                     f"{p['peak_rss'] / 2**30:.2f} GiB |")
    lines += [
        "",
        "## How it was measured",
        "",
        "- Each ingest runs `stages.ingest.stage.run` in a child process into an empty warehouse; the time is "
        "`time.perf_counter()` around the call. Peak memory is the largest sum of VmRSS over the child "
        "and its worker processes (pages shared after fork are counted once per process, so this is an "
        f"upper bound); VmHWM of the main process {f['main_hwm_gib']:.2f} GiB, largest worker "
        f"ru_maxrss {f['worker_maxrss_gib']:.2f} GiB.",
        "- The server-logs-only ingest reads hard links to every server.log and cmd.sh of the campaign; "
        "grep reads the same files, timed with `time.perf_counter()` around the subprocess.",
        "- The no-op re-ingest runs ingest again on the unchanged campaign (every folder's fingerprint "
        f"matches); {f['noop_process_s']:.2f} s per run including the process start and imports.",
        "- Sizes above 1x are whole copies of the campaign under new run ids (hard links: the same bytes "
        "read again from the page cache, run ids inside the copied files unchanged); sizes below 1x are "
        "a prefix of its runs.",
        f"- ingest_errors: {len(r['ingest_errors'])} rows, expected {len(r['expected_errors'])} (the "
        "result files cut short in interrupted runs).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])

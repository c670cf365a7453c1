"""The benchmark's report: the figures and pass/fail checks from the measurements, and report.md."""
from __future__ import annotations

import os
import platform
import statistics
from datetime import datetime, timezone
from typing import Any

from stages.tools.bench.benchmark_measure import GREP_PATTERN, SAMPLE_S

TARGETS = {"log_mb_s": 150.0, "peak_rss_gib": 1.5, "noop_s": 2.0, "growth_spread": 0.25}


def build_report(*, params, campaign, files, all_bytes, log_bytes, log_files, full, noop, logs_only,
                 grep_s, points, errors, load_before, repeats) -> dict[str, Any]:
    """The report's figures, checks against TARGETS, machine and campaign, as one dict."""
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
        f"Synthetic campaign (stages/tools/synth/campaign.py, seed {c['seed']}): {c['runs']} runs, {c['files']:,} files, "
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

"""The benchmark's measuring: ingest in a child process that samples its tree's memory, and grep timed.

`measure_ingest` starts `python -m stages.tools.bench.benchmark_measure --child ARGS`; the child runs the
ingest and prints one JSON line with its timings and memory.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from stages.core.config import CampaignError
from stages.tools.bench.benchmark_campaign import Progress

GREP_PATTERN = "KV cache size"
SAMPLE_S = 0.05


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
        remove_warehouse(warehouse)
    folders = sum(1 for p in runs_dir.iterdir() if p.is_dir())
    args = {"label": label, "runs_dir": str(runs_dir), "warehouse": str(warehouse), "root": str(root),
            "repeats": repeats, "plan_folders": folders}
    say(f"bench: ingest {label} ({folders} folders{', x' + str(repeats) if repeats > 1 else ''})")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "stages.tools.bench.benchmark_measure", "--child",
                             json.dumps(args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[3])
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


def remove_warehouse(warehouse: Path) -> None:
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


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])

"""The benchmark's synthetic campaign on disk: written or reused, hard-linked copies, byte counts."""
from __future__ import annotations

import json
import os
import shutil
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from stages.core.progress import Progress
from stages.tools.synth import campaign as synth

RUNS_AT_1X = 300
BYTES_AT_1X = 5 * 10**9


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

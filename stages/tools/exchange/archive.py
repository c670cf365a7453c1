"""`campaign archive`: put the raw run folders under DVC, so an auditor can `dvc pull` them.

`dvc add <runs>` records every run folder in `<runs>.dvc` (commit that file with dvc.lock), and,
when a DVC remote is configured, `dvc push` sends the run folders and every cached stage output
(facts, derived tables, site) there. An auditor then clones the repository, runs `dvc pull`, and
`campaign trace --verify FACT` recomputes any published number from the raw files.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from stages.core.config import CampaignError, Paths


def _dvc(root: Path, *args: str) -> subprocess.CompletedProcess:
    from shutil import which

    exe = which("dvc")
    if exe is None:
        raise CampaignError("dvc not found on PATH (use the project's .venv)")
    return subprocess.run([exe, *args], cwd=root, capture_output=True, text=True)


def remotes(root: Path) -> list[str]:
    out = _dvc(root, "remote", "list")
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


def run(*, paths: Paths, push: bool = True, progress=lambda s: None) -> dict:
    runs = paths.runs.relative_to(paths.root).as_posix()
    if not paths.runs.is_dir() or not any(paths.runs.iterdir()):
        raise CampaignError(f"{runs}: no run folders to archive")
    progress(f"dvc add {runs}")
    out = _dvc(paths.root, "add", "--quiet", runs)
    if out.returncode != 0:
        raise CampaignError(f"dvc add {runs} failed: {(out.stderr or out.stdout).strip().splitlines()[-1]}")
    summary = {"tracked": f"{runs}.dvc", "folders": sum(1 for p in paths.runs.iterdir() if p.is_dir()),
               "pushed": False}
    if push and remotes(paths.root):
        progress("dvc push (run folders and cached stage outputs)")
        out = _dvc(paths.root, "push", "--quiet")
        if out.returncode != 0:
            raise CampaignError(f"dvc push failed: {(out.stderr or out.stdout).strip().splitlines()[-1]}")
        summary["pushed"] = True
    return summary

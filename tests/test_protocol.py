"""The run stage depends on what decides what was measured, not on the run code: in a copy of the
project with a recorded dvc.lock, editing a run-stage Python file leaves `dvc status` clean for the
run stage, and bumping `protocol` in params.yaml (or changing a listed spec) marks it changed."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DVC = str(Path(sys.executable).parent / "dvc")


def sh(*args: str, cwd: Path) -> str:
    env = {**os.environ, "HOME": str(cwd), "DVC_NO_ANALYTICS": "1"}
    out = subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{' '.join(args)}: {out.stdout[-2000:]}{out.stderr[-2000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The project's pipeline and code in a fresh repository, the run stage's outputs in place
    (made here, no engine started) and recorded in dvc.lock with `dvc commit`."""
    root = tmp_path_factory.mktemp("protocol")
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy2(ROOT / name, root / name)
    shutil.copytree(ROOT / "stages", root / "stages", ignore=shutil.ignore_patterns("__pycache__"))
    params = yaml.safe_load((root / "params.yaml").read_text())
    paths = params["paths"]
    model = root / paths["models"] / next(iter(params["models"]))
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}\n")
    (root / paths["ledger"]).mkdir(parents=True)
    (root / paths["ledger"] / "schedule.json").write_text('{"specs": {}}\n')
    sh("git", "init", "-q", cwd=root)
    sh(DVC, "init", "-q", cwd=root)
    sh(DVC, "commit", "-f", "-q", "run", cwd=root)
    assert "run:" in (root / "dvc.lock").read_text()
    return root


def run_stage_status(root: Path) -> str:
    return sh(DVC, "status", "run", cwd=root)


def test_a_code_edit_leaves_the_run_stage_up_to_date_and_a_protocol_bump_does_not(project):
    assert "up to date" in run_stage_status(project)
    for name in ("needle.py", "schedule.py", "stage.py", "engine.py"):
        with (project / "stages" / "run" / name).open("a") as f:
            f.write("\n# an edit that changes no measurement\n")
    assert "up to date" in run_stage_status(project)

    params = project / "params.yaml"
    text = params.read_text()
    bumped = re.sub(r"(?m)^protocol: (\d+)", lambda m: f"protocol: {int(m.group(1)) + 1}", text)
    assert bumped != text
    params.write_text(bumped)
    status = run_stage_status(project)
    assert re.search(r"modified:\s+protocol\n", status), status
    params.write_text(text)
    assert "up to date" in run_stage_status(project)


def test_a_listed_specs_settings_mark_the_run_stage_changed(project):
    params = project / "params.yaml"
    text = params.read_text()
    data = yaml.safe_load(text)
    data["specs"][data["run_specs"][0]]["args"]["--max-num-seqs"] = 3
    params.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        assert re.search(r"modified:\s+specs\n", run_stage_status(project))
    finally:
        params.write_text(text)

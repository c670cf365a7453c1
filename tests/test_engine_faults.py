"""An engine killed in the middle of a sweep.

The point in flight is recorded as failed with its reason, the rest of the run's points are
skipped and marked in launch.out, the run ends as engine_died with exit status 0 (so `dvc repro`
goes on with the next spec), the folder is sealed, and nothing of the engine is left running.
What is tested is the run stage's handling of an engine's death, so the engine is the light
stand-in (tests/fixtures/standin_python), each answer a second late so that the kill lands inside
a point; the real engine's start, serving and stop are test_pipeline_engine's.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from stages.run.engine import group_members

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PORT = 8023
STANDIN_PYTHON = ROOT / "tests" / "fixtures" / "standin_python"


def engine_pids() -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(part.endswith(b"standin_engine.py") for part in cmd) and str(PORT).encode() in cmd:
                pids.append(int(proc.name))
    return pids


def test_engine_killed_mid_sweep(tmp_path):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["profiles"]["local-cpu"].update(port=PORT, python=str(STANDIN_PYTHON))
    params["specs"]["tiny-seqs4"]["workloads"] = ["chat"]
    params["specs"]["tiny-seqs4"]["env"] = {"STANDIN_ENGINE": "1", "STANDIN_ANSWER_DELAY_S": "1"}
    params["workloads"]["local-cpu"]["chat"]["concurrency"] = [1, 2, 4, 8]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "STANDIN_PYTHON": sys.executable}
    subprocess.run(["campaign", "model", "tiny-llama"], cwd=tmp_path, env=env, check=True, capture_output=True)
    proc = subprocess.Popen(["campaign", "run", "tiny-seqs4"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    runs = tmp_path / "data" / "runs"
    deadline = time.monotonic() + 300
    killed = None
    while time.monotonic() < deadline and proc.poll() is None:
        bench = next(runs.glob("*/bench"), None) if runs.exists() else None
        if bench and (bench / "chat__c02.cmd").exists():     # the second point has started
            killed = engine_pids()
            assert killed, "engine process not found"
            pgid = os.getpgid(killed[0])
            os.killpg(pgid, signal.SIGKILL)
            break
        time.sleep(0.2)
    assert killed, "the sweep never reached its second point"
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out

    folder = next(runs.iterdir())
    launch = (folder / "launch.out").read_text().splitlines()
    facts = [line.split("=", 1) for line in launch]
    keys = [k for k, _ in facts]
    assert ("run_status", "engine_died") in [tuple(f) for f in facts]
    skipped = [v for k, v in facts if k == "point_skipped"]
    errors = [v.split()[0] for k, v in facts if k == "point_error"]
    # the kill lands during chat__c02, or (on a loaded machine) just as it completed, and then
    # chat__c04 is the point that fails: either way every later point is skipped
    if [v.split()[0] for v in skipped] == ["chat__c08"]:
        assert errors == ["chat__c04"], launch
    else:
        assert [v.split()[0] for v in skipped] == ["chat__c04", "chat__c08"], launch
    assert all("engine no longer running" in v for v in skipped)
    assert "point_error" in keys or (folder / "bench" / "chat__c02.json").exists()
    assert (folder / "bench" / "chat__c01.json").exists()          # measured before the kill
    ledger = json.loads((tmp_path / "data" / "ledger" / "tiny-seqs4.json").read_text())
    assert ledger["run_status"] == "engine_died"
    assert (folder / "MANIFEST.sha256").exists()
    assert engine_pids() == [] and group_members(pgid) == []

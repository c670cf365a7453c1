"""A copy of the project to run the pipeline in (copy_project), the small campaign it runs on the
local engine (small_params), a command run there (sh), and the engines left running, real or stand-in
(engine_processes)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from helpers import PROJECT as ROOT

BIN = Path(sys.executable).parent


def sh(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


def small_params() -> dict:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["run_specs"] = ["tiny-seqs4"]
    params["profiles"]["local-cpu"]["port"] = 8019
    params["specs"]["tiny-seqs4"]["workloads"] = ["chat", "ramp", "agents"]
    group = params["workloads"]["local-cpu"]
    group["chat"]["concurrency"] = [1, 4]
    group["ramp"].update(turns=3, start_tokens=512, end_tokens=2048)
    group["agents"].update(sessions=2, turns=2)
    return params


def copy_project(dest: Path) -> None:
    """What a clone has (tracked files, committed raw inputs included), plus source files not yet
    committed; what a campaign generated under data/ stays behind."""
    tracked = sh("git", "ls-files", "--cached", "-z", cwd=ROOT).stdout.split("\0")
    untracked = sh("git", "ls-files", "--others", "--exclude-standard", "-z", cwd=ROOT).stdout.split("\0")
    for rel in filter(None, tracked + [u for u in untracked if not u.startswith("data/")]):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def engine_processes(ports: range | None = None) -> list[str]:
    """Command lines of the vLLM servers (or the tests' stand-in engines,
    tests/fixtures/fake_docker/standin_engine.py) running here (those listening on `ports`, if
    given)."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            engine = "vllm.entrypoints" in cmd or "standin_engine.py" in cmd
            if engine and (ports is None or any(f"--port {p}" in cmd for p in ports)):
                out.append(cmd)
    return out

"""Shared by the tests that run stand-in engines through the stand-in docker
(tests/fixtures/fake_docker): the shipped params, a stand-in profile, a copy of the project's
pipeline to run in, a command run there, and the docker calls it recorded."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from helpers import FIXTURES, PROJECT
from stages.formats import launch_out, run_folder

ROOT = PROJECT
FAKE = FIXTURES / "fake_docker"
SHIPPED = yaml.safe_load((ROOT / "params.yaml").read_text())


def standin_profile(port: int, env: dict[str, str] | None = None) -> dict:
    """A docker profile of stand-in engines (image standin/...) on an 8-GPU node, with local-cpu's
    rules, gate settings and prompt bank."""
    local = SHIPPED["profiles"]["local-cpu"]
    return {"executor": "docker", "engine": "vllm", "image": "standin/engine:1", "python": None, "port": port,
            "docker": {"shm_size": "1g", "mounts": []}, "env": dict(env or {}),
            "ready_timeout_s": 60, "gpus_per_node": 8, "gpu_sampler": None,
            "client_workers": local["client_workers"], "rules": local["rules"], "gate": local["gate"]}


def project_copy(root: Path, params: dict) -> Path:
    """The project's pipeline (dvc.yaml, stages/) with `params` as params.yaml, in `root`."""
    shutil.copy2(ROOT / "dvc.yaml", root / "dvc.yaml")
    shutil.copytree(ROOT / "stages", root / "stages", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root


def sh(root: Path, *args: str, log: Path) -> subprocess.CompletedProcess:
    """A command in the project copy, with the stand-in docker and this environment's `campaign`
    and `dvc` first on PATH."""
    env = {**os.environ, "FAKE_DOCKER_LOG": str(log), "FAKE_DOCKER_PYTHON": sys.executable,
           "PATH": os.pathsep.join([str(FAKE), str(Path(sys.executable).parent), os.environ["PATH"]]),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(list(args), cwd=root, env=env, capture_output=True, text=True, timeout=300)


def sh_all(root: Path, *commands: list[str], log: Path) -> list[subprocess.CompletedProcess]:
    """Each command in the project copy (sh), in order, each required to succeed: a failure shows
    the command and the tail of its output."""
    outs = []
    for cmd in commands:
        out = sh(root, *cmd, log=log)
        assert out.returncode == 0, f"{cmd}: {out.stdout[-3000:]}{out.stderr[-3000:]}"
        outs.append(out)
    return outs


def docker_runs(log: Path) -> list[list[str]]:
    return [c for c in map(json.loads, log.read_text().splitlines()) if c[0] == "run"]


def flag(call: list[str], name: str) -> str:
    return call[call.index(name) + 1]


def launch_facts(folder: Path) -> dict[str, str]:
    """launch.out of a run folder as key=value, without its per-point lines."""
    facts = launch_out.launch_facts((folder / run_folder.LAUNCH_OUT).read_bytes())
    return {key: value for key, value in facts.items() if not key.startswith("point_")}

"""The docker executor: commands checked against golden files, and a real run through a stand-in
docker that records its arguments and starts the light stand-in engine instead of a container
(what is checked is the executor's docker calls, the container's removal and the run folder; the
real engine runs end to end in tests/test_pipeline_engine.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from stages.run import schedule
from stages.cli import main

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden"
FAKE = Path(__file__).parent / "fixtures" / "fake_docker"
STAMP = re.compile(r"__\d{4}-\d{6}\b")


@pytest.mark.parametrize("spec", ["glm53-tp8-dcp8", "minimax-m3-tep8", "dsv4-pro-tep8",
                                  "qwen3-235b-sglang-tp4"])
def test_dry_run_prints_the_docker_command(spec):
    result = CliRunner().invoke(main, ["run", spec, "--dry-run", "--root", str(ROOT)])
    assert result.exit_code == 0, result.output
    got = STAMP.sub("__MMDD-HHMMSS", result.output)
    assert got == (GOLDEN / f"dryrun_{spec}.txt").read_text()


def test_two_engines_side_by_side_get_internal_ports_of_their_own():
    base = yaml.safe_load((ROOT / "params.yaml").read_text())["profiles"]["h200x8"]["port"]

    def dry_run(spec, gpus, port):
        result = CliRunner().invoke(main, ["run", spec, "--dry-run", "--gpus", gpus, "--port",
                                           str(port), "--root", str(ROOT)])
        assert result.exit_code == 0, result.output
        return result.output

    vllm_first, vllm_second = dry_run("qwen3-235b-tp4", "0-3", base), dry_run("qwen3-235b-tp4", "4-7", base + 1)
    assert "-e VLLM_PORT=20000 " in vllm_first and "-e VLLM_PORT=20100 " in vllm_second
    sglang = dry_run("qwen3-235b-sglang-tp4", "4-7", base + 1)
    assert "--nccl-port 20100" in sglang and "VLLM_PORT" not in sglang


def test_a_spec_that_sets_its_internal_port_keeps_it():
    from stages.run.executors import internal_ports
    env, args = internal_ports("vllm", port=8001, base_port=8000, env={"VLLM_PORT": "31000"}, args={})
    assert env == {"VLLM_PORT": "31000"} and args == {}
    env, args = internal_ports("sglang", port=8001, base_port=8000, env={}, args={"--nccl-port": 5})
    assert env == {} and args == {"--nccl-port": 5}
    env, _ = internal_ports("vllm", port=7999, base_port=8000, env={}, args={})   # below the profile's
    assert 20000 <= int(env["VLLM_PORT"]) < 60000


def test_timeline_runs_two_quads_at_once_and_the_node_spec_waits():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    jobs = schedule.jobs_from(params, ["qwen3-235b-tp4", "qwen3-235b-sglang-tp4", "glm53-tp8-dcp8"])
    a, b, big = schedule.plan(jobs)
    assert (a.gpus, b.gpus) == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert a.start_min == b.start_min == 0
    assert big.gpus == tuple(range(8)) and big.start_min == max(a.end_min, b.end_min)
    text = schedule.timeline([a, b, big])
    assert re.search(r"glm53-tp8-dcp8 +0-7 +45 +135", text)


def test_a_waiting_node_spec_is_not_overtaken():
    jobs = [schedule.Job("q1", 4, 10), schedule.Job("node", 8, 10), schedule.Job("q2", 4, 1)]
    slots = {s.spec: s for s in schedule.plan(jobs)}
    assert slots["node"].start_min == 10 and slots["q2"].start_min == 20


def test_docker_executor_runs_the_engine_and_removes_the_container(tmp_path):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["profile"] = "docker-test"
    params["profiles"]["docker-test"] = {
        "executor": "docker", "engine": "vllm", "image": "vllm/vllm-openai:v0.32.0", "python": None, "port": 8025,
        "docker": {"shm_size": "1g", "mounts": []}, "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
        "ready_timeout_s": 600, "rules": params["profiles"]["local-cpu"]["rules"],
        "gate": params["profiles"]["local-cpu"]["gate"]}     # the tiny model's short answer budget
    spec = params["specs"]["tiny-seqs4"]
    spec.update(profile="docker-test", gpus=[0], workloads=["chat"])
    params["workloads"]["docker-test"] = {"chat": {**params["workloads"]["local-cpu"]["chat"], "concurrency": [1]}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    log = tmp_path / "docker.log"
    env = {**os.environ, "PATH": f"{FAKE}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "FAKE_DOCKER_LOG": str(log), "FAKE_DOCKER_PYTHON": sys.executable,
           "FAKE_DOCKER_ENGINE": "standin"}
    subprocess.run(["campaign", "model", "tiny-llama"], cwd=tmp_path, env=env, check=True, capture_output=True)
    out = subprocess.run(["campaign", "run", "tiny-seqs4"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    run_id, status, run_status, points = out.stdout.split()[-4:]
    assert (status, run_status, points) == ("ready", "complete", "points=1")

    calls = [json.loads(line) for line in log.read_text().splitlines()]
    runs = [c for c in calls if c[0] == "run"]
    assert len(runs) == 1
    assert runs[0][:4] == ["run", "--rm", "--name", run_id]
    assert runs[0][runs[0].index("--gpus") + 1] == '"device=0"'
    assert ["rm", "-f", run_id] in calls                        # removed on the way out
    assert calls.index(["rm", "-f", run_id]) > calls.index(runs[0])
    folder = tmp_path / "data" / "runs" / run_id
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["executor"] == "docker" and meta["image"] == "vllm/vllm-openai:v0.32.0"
    assert meta["image_digest"].startswith("vllm/vllm-openai@sha256:")
    assert (folder / "cmd.sh").read_text().splitlines()[-1].startswith("docker run --rm --name " + run_id)
    assert (folder / "bench" / "chat__c01.json").exists()
    leftover = subprocess.run(["pgrep", "-f", "port 8025"], capture_output=True, text=True).stdout
    assert leftover.strip() == ""


def test_only_gpu_sets_spanning_both_quads_get_the_cross_p2p_check():
    from stages.run.quads import spans_quads
    assert spans_quads([0, 1, 2, 3, 4, 5, 6, 7]) and spans_quads([2, 5])
    assert not spans_quads([0, 1, 2, 3]) and not spans_quads([4, 5, 6, 7])


def test_cross_p2p_runs_the_peer_check_in_the_image_on_the_gpu_set(tmp_path):
    from stages.run.executors import PEER_CHECK, DockerExecutor
    log = tmp_path / "docker.log"
    env = {"FAKE_DOCKER_LOG": str(log), "FAKE_DOCKER_PYTHON": sys.executable}
    ex = DockerExecutor(root=tmp_path, image="vllm/vllm-openai:v0.32.0", docker_bin=str(FAKE / "docker"))
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        answer = ex.cross_p2p([0, 1, 2, 3, 4, 5, 6, 7])
    # the stand-in runs the check with this machine's torch: no GPU here, so no peer access
    assert answer == "no"
    [call] = [json.loads(line) for line in log.read_text().splitlines()]
    assert call == ["run", "--rm", "--gpus", '"device=0,1,2,3,4,5,6,7"', "--entrypoint", "python3",
                    "vllm/vllm-openai:v0.32.0", "-c", PEER_CHECK]
    broken = DockerExecutor(root=tmp_path, image="x", docker_bin=str(tmp_path / "no-docker"))
    assert broken.cross_p2p([0, 4]) == "error FileNotFoundError"

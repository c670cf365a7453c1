"""The scheduler on the node: each engine on its own GPU set, port and container, two quad-sized
specs at once; the run stage's ledger, which launches a spec again only when what decides its
measurements changed. The engines are the light stand-in (tests/fixtures/fake_docker), run by a
stand-in docker that records its calls."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from helpers.standin_helpers import (ROOT, SHIPPED, docker_runs, flag, launch_facts, project_copy, sh,
                                     sh_all, standin_profile)

from stages.cli import main
from stages.run import schedule

BASE_PORT = 8046


def test_dry_run_puts_two_quad_specs_on_both_quads_at_once_on_two_ports():
    result = CliRunner().invoke(main, ["schedule", "--dry-run", "qwen3-235b-tp4", "qwen3-235b-sglang-tp4",
                                       "--root", str(ROOT)])
    assert result.exit_code == 0, result.output
    port = SHIPPED["profiles"]["h200x8"]["port"]
    assert re.search(rf"qwen3-235b-tp4 +0-3 +0 +45 +{port} ", result.output)
    assert re.search(rf"qwen3-235b-sglang-tp4 +4-7 +0 +45 +{port + 1} ", result.output)
    assert f"at     0 min: campaign run qwen3-235b-tp4 --gpus 0-3 --port {port}\n" in result.output
    assert f"at     0 min: campaign run qwen3-235b-sglang-tp4 --gpus 4-7 --port {port + 1}\n" in result.output


def test_the_whole_node_spec_takes_the_first_slots_port_and_cpu_specs_run_one_at_a_time():
    quads = schedule.node_quads(8)
    a, b, big = schedule.plan([schedule.Job("a", 4, 10), schedule.Job("b", 2, 20),
                               schedule.Job("big", 8, 5)], quads)
    assert (a.index, b.index, big.index) == (0, 1, 0) and big.start_min == 20
    cpu = schedule.node_quads(0)
    one, two = schedule.plan([schedule.Job("one", 0, 10), schedule.Job("two", 0, 10)], cpu)
    assert (one.gpus, two.gpus, one.index, two.index) == ((), (), 0, 0)
    assert two.start_min == one.end_min
    assert schedule.run_command("one", (), 8011) == ["run", "one", "--port", "8011"]
    with pytest.raises(Exception, match="needs 4 GPUs; the node has 0"):
        schedule.jobs_from({"specs": {"x": {"gpus": 4}}}, ["x"], cpu)


def test_a_dry_run_of_specs_of_two_profiles_is_refused():
    result = CliRunner().invoke(main, ["schedule", "--dry-run", "tiny-seqs4", "qwen3-235b-tp4",
                                       "--root", str(ROOT)])
    assert result.exit_code == 2
    assert "cannot share a node" in result.output


def test_the_fingerprint_follows_what_decides_the_measurement():
    params = copy.deepcopy(SHIPPED)
    fp = schedule.fingerprint(params, "qwen3-235b-tp4")
    same = copy.deepcopy(params)
    same["profiles"]["h200x8"]["port"] = 9000                 # where it listens: not measured
    same["specs"]["glm53-tp8-dcp8"]["est_minutes"] = 1        # another spec
    same["specs"]["qwen3-235b-tp4"]["est_minutes"] = 5        # the scheduler's estimate
    same["profiles"]["h200x8"]["profiler"] = None             # the profiler's defaults, unset
    assert schedule.fingerprint(same, "qwen3-235b-tp4") == fp
    for edit in (lambda p: p.__setitem__("protocol", p["protocol"] + 1),
                 lambda p: p["gate"].__setitem__("seed", 12),
                 lambda p: p["profiles"]["h200x8"].__setitem__("image", "vllm/vllm-openai:v0.32.0"),
                 lambda p: p["profiles"]["h200x8"].__setitem__("profiler", {"max_iterations": 8}),
                 lambda p: p["workloads"]["h200x8"]["short-1k"].__setitem__("concurrency", [1]),
                 lambda p: p["specs"]["qwen3-235b-tp4"]["args"].__setitem__("--max-num-seqs", 32)):
        changed = copy.deepcopy(params)
        edit(changed)
        assert schedule.fingerprint(changed, "qwen3-235b-tp4") != fp


def test_the_run_stage_is_the_scheduler_and_its_output_is_the_schedulers_ledger():
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["run"]
    assert stage["cmd"] == "campaign schedule"
    [out] = stage["outs"]
    [(path, opts)] = out.items()
    assert path == "${paths.ledger}/" + schedule.LEDGER_FILE
    assert opts == {"cache": False, "persist": True}


# ------------------------------------------------------------------ two stand-in engines at once

def node_params() -> dict:
    """A node of stand-in engines: two quad-sized specs with a small multi-turn workload."""
    params = copy.deepcopy(SHIPPED)
    params["profile"] = "standin-node"
    params["profiles"]["standin-node"] = standin_profile(BASE_PORT, {"STANDIN_ANSWER_DELAY_S": "0.6"})
    params["workloads"]["standin-node"] = {"agents": {
        "kind": "agents", "description": "two sessions", "sessions": 2, "shared_history_tokens": 256,
        "turn_tokens": 64, "turns": 2, "output_tokens": 8}}
    for name in ("quad-a", "quad-b"):
        params["specs"][name] = {"profile": "standin-node", "model": "tiny-llama",
                                 "layout": name.replace("-", "_"), "gpus": 4, "est_minutes": 1,
                                 "workloads": ["agents"], "args": {"--max-model-len": 4096}}
    params["run_specs"] = ["quad-a", "quad-b"]
    return params


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> dict:
    """`dvc repro run` in a copy of the project's pipeline on the stand-in node."""
    root = project_copy(tmp_path_factory.mktemp("node"), node_params())
    log = root / "docker.log"
    *_, out = sh_all(root, ["git", "init", "-q"], ["dvc", "init", "-q"], ["dvc", "repro", "run"], log=log)
    return {"root": root, "log": log, "output": out.stdout + out.stderr,
            "ledger": json.loads((root / "data" / "ledger" / "schedule.json").read_text())["specs"]}


def test_dvc_repro_runs_two_standin_engines_side_by_side_on_their_own_gpus_ports_and_containers(node):
    root, runs = node["root"], docker_runs(node["log"])
    assert "Running stage 'run'" in node["output"]
    assert len(runs) == 2
    by_gpus = {flag(c, "--gpus"): c for c in runs}
    assert set(by_gpus) == {'"device=0,1,2,3"', '"device=4,5,6,7"'}
    ports = {flag(c, "--gpus"): flag(c, "--port") for c in runs}
    assert ports == {'"device=0,1,2,3"': str(BASE_PORT), '"device=4,5,6,7"': str(BASE_PORT + 1)}
    assert len({flag(c, "--name") for c in runs}) == 2
    times = []
    for spec, gpus, port in (("quad-a", "0,1,2,3", BASE_PORT), ("quad-b", "4,5,6,7", BASE_PORT + 1)):
        entry = node["ledger"][spec]
        assert entry["run_status"] == "complete"
        assert entry["fingerprint"] == schedule.fingerprint(node_params(), spec)
        folder = root / "data" / "runs" / entry["run_id"]
        meta = json.loads((folder / "meta.json").read_text())
        assert (meta["gpus"], meta["port"], meta["container"]) == (gpus, port, entry["run_id"])
        launch = launch_facts(folder)
        assert (launch["gpus"], launch["port"], launch["container"]) == (gpus, str(port), entry["run_id"])
        assert (launch["status"], launch["run_status"], launch["points"]) == ("ready", "complete", "1")
        assert launch["gate_score"] == "1.0"            # the stand-in finds the needle
        assert int(launch["engine_kv_tokens"]) > 0      # its startup lines read as vLLM's
        assert f"visible GPUs {gpus}" in (folder / "server.log").read_text()
        assert (folder / "agents.agents.jsonl").exists()
        times.append((meta["started_at"], launch["finished_at"]))
    (start_a, end_a), (start_b, end_b) = times
    assert max(start_a, start_b) < min(end_a, end_b)   # the two runs overlapped in time
    calls = [json.loads(line) for line in node["log"].read_text().splitlines()]
    assert all(["rm", "-f", e["run_id"]] in calls for e in node["ledger"].values())


def test_a_spec_already_run_with_the_same_settings_is_not_launched_again(node):
    root, log = node["root"], node["log"]
    before = len(docker_runs(log))
    assert "Stage 'run' didn't change" in sh(root, "dvc", "repro", "run", log=log).stdout

    params = node_params()
    params["profiles"]["standin-node"]["ready_timeout_s"] = 90    # a stage param, not measured
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = sh(root, "dvc", "repro", "run", log=log)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Running stage 'run'" in out.stdout
    assert len(docker_runs(log)) == before
    assert (out.stdout + out.stderr).count("already ran with these settings") == 2
    assert json.loads((root / "data" / "ledger" / "schedule.json").read_text())["specs"] == node["ledger"]

    params["specs"]["quad-b"]["env"] = {"STANDIN_THINK_TOKENS": "4"}   # one spec's settings change
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = sh(root, "dvc", "repro", "run", log=log)
    assert out.returncode == 0, out.stderr[-2000:]
    again = docker_runs(log)[before:]
    assert len(again) == 1 and flag(again[0], "--gpus") == '"device=0,1,2,3"'
    assert "STANDIN_THINK_TOKENS=4" in again[0]
    ledger = json.loads((root / "data" / "ledger" / "schedule.json").read_text())["specs"]
    assert ledger["quad-a"] == node["ledger"]["quad-a"]
    assert ledger["quad-b"]["run_id"] != node["ledger"]["quad-b"]["run_id"]
    assert ledger["quad-b"]["fingerprint"] == schedule.fingerprint(params, "quad-b")
    assert "up to date" in sh(root, "dvc", "status", "run", log=log).stdout


def test_what_a_run_prints_on_its_way_out_goes_to_its_exit_log_not_the_console(tmp_path):
    import subprocess
    import sys
    log = schedule.exit_log(tmp_path, "tiny-seqs4")
    assert log == tmp_path / "tiny-seqs4.exit.log"
    code = ("import os, sys; from pathlib import Path; from stages.core.files import divert_stderr\n"
            "print('last line'); print('said', file=sys.stderr)\n"
            f"divert_stderr(Path({str(log)!r}))\n"
            "os.write(2, b'nanobind: leaked 4 instances!\\n')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0
    assert done.stdout == "last line\n" and done.stderr == "said\n"
    assert log.read_text() == "nanobind: leaked 4 instances!\n"

"""The slurm executor: each spec one Slurm job.

The commands it builds are checked against the profile and spec settings; then a real single-host
Slurm cluster (tests/helpers/slurm_cluster.py) runs the local-cpu specs as jobs through `dvc repro` on a
profile whose executor is slurm: one spec completes and the pipeline ingests, derives and renders it
as it would a local run; another hits its time limit and becomes a failed launch with Slurm's
reason. A third is interrupted mid-run: its job is cancelled, no engine is left and its run is
marked interrupted. What they check is Slurm's handling of the jobs and their processes, not the
engine: they run the light stand-in engine (tests/fixtures/standin_python), as the docker
executor's test does; the real engine's start, serving and stop are test_pipeline_engine's.
"""
from __future__ import annotations

import html
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from helpers.pipeline_project import copy_project, engine_processes, small_params
from helpers.slurm_cluster import SlurmCluster
from stages.core.config import CampaignError
from stages.formats.launch_out import launch_facts
from stages.formats.run_folder import LAUNCH_OUT
from stages.run import slurm
from stages.run.executors import ContainerStepExecutor, executor_for

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SHIPPED = yaml.safe_load((ROOT / "params.yaml").read_text())
PORT = 8331      # above the other tests' engines (real or stand-in), which run at 8011 to 8057
JOB_PORTS = range(PORT, PORT + 200)   # a job's engine takes a free port from PORT on
# The profile's engine Python: the real interpreter, or for a spec whose env sets STANDIN_ENGINE the
# light stand-in engine (relative to the project root, as a profile may name it).
STANDIN_PYTHON = "tests/fixtures/standin_python"
STANDIN = {"STANDIN_ENGINE": "1"}


def node_spec(gpus: int, **extra) -> dict:
    return {"profile": "h200x8", "model": "m", "layout": "l", "gpus": gpus,
            "args": {"--max-model-len": 1024}, **extra}


def test_sbatch_asks_for_the_spec_gpus_and_the_whole_node_for_eight():
    settings = slurm.Settings.from_profile(SHIPPED["profiles"]["h200x8"])
    whole = slurm.sbatch_argv(spec_name="big", spec=node_spec(8), settings=settings, gpus_per_node=8,
                              run_id="r1", output=Path("/shared/out/r1.out"), root=Path("/shared/p"))
    quad = slurm.sbatch_argv(spec_name="quad", spec=node_spec(4, time_limit="00:45:00"),
                             settings=settings, gpus_per_node=8, run_id="r2",
                             output=Path("/shared/out/r2.out"), root=Path("/shared/p"))
    assert {"--gpus=8", "--exclusive", "--nodes=1", "--partition=gpu", "--time=04:00:00",
            "--job-name=r1", "--output=/shared/out/r1.out", "--chdir=/shared/p"} <= set(whole)
    assert "--gpus=4" in quad and "--exclusive" not in quad
    assert "--time=00:45:00" in quad                   # the spec's own limit wins
    gres = slurm.Settings.from_profile({"slurm": {"gpu_flag": "gres", "account": "team"}})
    argv = slurm.sbatch_argv(spec_name="quad", spec=node_spec(4), settings=gres, gpus_per_node=8,
                             run_id="r3", output=Path("o"), root=Path("."))
    assert "--gres=gpu:4" in argv and "--account=team" in argv and not any(
        a.startswith("--partition") for a in argv)


def test_unknown_slurm_settings_are_named():
    with pytest.raises(CampaignError, match="unknown partitions"):
        slurm.Settings.from_profile({"slurm": {"partitions": "gpu"}})


def test_the_batch_script_runs_the_spec_inside_the_job():
    script = slurm.batch_script(spec_name="tiny-seqs4", run_id="r1", python="/p/.venv/bin/python")
    assert script.splitlines()[-1] == ("exec /p/.venv/bin/python -m stages.cli run tiny-seqs4 "
                                       "--executor slurm --run-id r1 --port auto")


def test_slurm_records_are_read_from_sacct_and_from_the_controller():
    sacct = "41|r1|TIMEOUT|00:01:24|0:15|gpu-03|TimeLimit|gpu|2026-12-01T10:00:00|2026-12-01T10:01:24\n"
    rec = slurm.parse_sacct(sacct, "41")
    assert (rec["State"], rec["Reason"], rec["NodeList"], rec["Elapsed"]) == \
        ("TIMEOUT", "TimeLimit", "gpu-03", "00:01:24")
    assert slurm.parse_sacct("7|r|CANCELLED by 0|00:00:03|0:0|n|None|p|s|e", "7")["State"] == "CANCELLED"
    line = ("JobId=5 JobName=r2 UserId=root(0) JobState=NODE_FAIL Reason=NodeDown ExitCode=0:0 "
            "RunTime=00:10:00 Partition=gpu NodeList=gpu-07 StartTime=a EndTime=b")
    rec = slurm.parse_scontrol(line)
    assert (rec["State"], rec["Reason"], rec["NodeList"]) == ("NODE_FAIL", "NodeDown", "gpu-07")
    assert slurm.slurm_error(rec) == "Slurm ended job 5: NODE_FAIL (NodeDown) after 00:10:00, exit code 0:0"


def test_a_job_slurm_killed_is_a_failed_launch_unless_its_run_had_completed(tmp_path):
    rec = {"JobID": "9", "State": "TIMEOUT", "Reason": "TimeLimit", "Elapsed": "00:01:31",
           "ExitCode": "0:15", "source": "scontrol", "text": "JobId=9 JobState=TIMEOUT"}
    outcomes = {}
    for run_status in ("interrupted", "complete"):
        folder = tmp_path / run_status
        folder.mkdir()
        (folder / "launch.out").write_text(f"status=ready\nrun_status={run_status}\n")
        job = slurm.Job("s", folder.name, "9", tmp_path / "none.out", ["sbatch"], "#!/bin/bash\n")
        outcomes[run_status] = (slurm.finalize(folder, job, rec, cancelled=False),
                                launch_out(folder))
    status, facts = outcomes["interrupted"]        # Slurm stopped it mid-run
    assert (status, facts["status"], facts["slurm_state"]) == ("failed", "failed", "TIMEOUT")
    assert facts["error"] == "Slurm ended job 9: TIMEOUT (TimeLimit) after 00:01:31, exit code 0:15"
    status, facts = outcomes["complete"]           # every point measured before Slurm's check
    assert (status, facts["status"], facts["slurm_state"]) == ("complete", "ready", "TIMEOUT")
    assert "error" not in facts and facts["slurm_note"].endswith("after the run had completed")


def test_the_container_engine_is_a_job_step_in_the_image():
    prof = {**SHIPPED["profiles"]["h200x8"], "executor": "slurm",
            "slurm": {**SHIPPED["profiles"]["h200x8"]["slurm"], "engine": "container"}}
    ex = executor_for(prof, root=Path("."))
    assert isinstance(ex, ContainerStepExecutor)
    launch = ex.launch(run_id="r1", engine="vllm", model_path="/mnt/data/models/m", args={"--tp": 8},
                       env={"NCCL_P2P_LEVEL": "SYS"}, port=8005, gpus=[0, 1])
    assert launch.argv[:5] == ["srun", "--ntasks=1", "--job-name=r1",
                               "--container-image=vllm/vllm-openai:v0.31.0", "--no-container-mount-home"]
    assert "--container-mounts=/mnt/data/models:/mnt/data/models:ro" in launch.argv
    assert launch.argv[-8:] == ["serve", "/mnt/data/models/m", "--host", "0.0.0.0", "--port", "8005",
                                "--tp", "8"]
    assert launch.env == {"NCCL_P2P_LEVEL": "SYS"}


def job_env(env: dict) -> dict:
    """`env` with this environment's commands first on PATH, and the interpreter the stand-in
    Python runs (tests/fixtures/standin_python); Slurm passes both on to the jobs."""
    return {**env, "PATH": f"{BIN}{os.pathsep}{env['PATH']}", "STANDIN_PYTHON": sys.executable}


def sh(*args: str, cwd: Path, env: dict, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    env = job_env(env)
    out = subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {out.returncode}:\n{out.stdout[-3000:]}\n"
                             f"{out.stderr[-5000:]}")
    return out


def test_a_run_outside_a_job_is_refused(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    out = sh(sys.executable, "-m", "stages.cli", "run", "tiny-seqs4", "--executor", "slurm",
             cwd=ROOT, env=env, check=False)
    assert out.returncode == 2
    assert "runs a spec inside a Slurm job" in out.stderr


def slurm_params() -> dict:
    """Local-cpu with the slurm executor: tiny-seqs4 small (chat at 1 and 4), one CPU each so that
    both run at once, and tiny-timeout under a one-minute time limit with a
    workload it cannot finish in that time. Slurm checks time limits every half minute or so, so a
    run that merely takes about a minute may end before Slurm notices (as a full run of
    tiny-seqs16 did on a quiet machine); 3,000 requests of 256 output tokens one at a time, each
    answered after half a second by the stand-in engine, take far longer. All three specs run
    the stand-in engine."""
    params = small_params()
    prof = params["profiles"]["local-cpu"]
    prof.update(executor="slurm", port=PORT, python=STANDIN_PYTHON)
    prof["slurm"].update(cpus_per_task=1, poll_s=2, time_limit="00:20:00")
    params["specs"]["tiny-seqs4"]["workloads"] = ["chat"]
    params["specs"]["tiny-seqs4"]["env"] = dict(STANDIN)
    params["workloads"]["local-cpu"]["endless"] = {
        "description": "more requests than a one-minute job can send", "prompt_tokens": 256,
        "output_tokens": 256, "concurrency": [1], "prompts_per_user": 3000}
    params["specs"]["tiny-seqs16"]["env"] = dict(STANDIN)
    params["specs"]["tiny-timeout"] = {**params["specs"]["tiny-seqs16"], "layout": "cpu_timeout",
                                       "workloads": ["endless"], "time_limit": "00:01:00",
                                       "env": {**STANDIN, "STANDIN_ANSWER_DELAY_S": "0.5"}}
    params["run_specs"] = ["tiny-seqs4", "tiny-timeout"]
    return params


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with SlurmCluster(tmp_path_factory.mktemp("slurm"), cpus=2) as c:
        yield c


@pytest.fixture(scope="module")
def project(tmp_path_factory, cluster) -> Path:
    root = tmp_path_factory.mktemp("project")
    copy_project(root)
    (root / "params.yaml").write_text(yaml.safe_dump(slurm_params(), sort_keys=False))
    sh("git", "init", "-q", cwd=root, env=cluster.env)
    sh("git", "add", "-A", cwd=root, env=cluster.env)
    sh("git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "project",
       cwd=root, env=cluster.env)
    out = sh("dvc", "repro", cwd=root, env=cluster.env)
    assert "Running stage 'render'" in out.stdout
    (root / "repro.log").write_text(out.stdout + out.stderr)
    return root


def launch_out(folder: Path) -> dict[str, str]:
    """launch.out's facts as the run ended with them, read by the project's one reader."""
    return launch_facts((folder / LAUNCH_OUT).read_bytes())


@pytest.mark.slow
def test_dvc_repro_runs_the_specs_as_slurm_jobs(project: Path, cluster):
    log = (project / "repro.log").read_text()
    ledger = json.loads((project / "data" / "ledger" / "schedule.json").read_text())["specs"]
    assert {s: e["run_status"] for s, e in ledger.items()} == {"tiny-seqs4": "complete",
                                                                 "tiny-timeout": "failed"}
    assert "slurm: tiny-seqs4 job" in log and "RUNNING on" in log    # the queue state was shown
    assert log.count("slurm: ingest done") == 2                       # ingested as each job ended
    done = project / "data" / "runs" / ledger["tiny-seqs4"]["run_id"]
    facts = launch_out(done)
    record = json.loads((done / "slurm.json").read_text())
    assert record["record_source"] == "scontrol"                     # no accounting database here
    assert record["record"]["State"] == "COMPLETED" and record["record"]["ExitCode"] == "0:0"
    assert facts["slurm_job_id"] == record["job_id"] and facts["slurm_node"] == record["record"]["NodeList"]
    assert (facts["status"], facts["run_status"], facts["slurm_state"]) == ("ready", "complete", "COMPLETED")
    assert "[tiny-seqs4] run " in (done / "slurm.out").read_text()    # the job's own output
    assert (done / "MANIFEST.sha256").exists() and not (done / "launch.out").stat().st_mode & 0o222
    assert "slurm.json" in (done / "MANIFEST.sha256").read_text()
    meta = json.loads((done / "meta.json").read_text())
    assert meta["executor"] == "slurm" and meta["slurm"]["engine"] == "local"
    assert meta["slurm"]["job_id"] == record["job_id"]

    # Slurm ended the other job at its time limit: a failed launch, with Slurm's reason
    killed = project / "data" / "runs" / ledger["tiny-timeout"]["run_id"]
    facts = launch_out(killed)
    assert (facts["status"], facts["run_status"], facts["slurm_state"], facts["slurm_reason"]) == \
        ("failed", "failed", "TIMEOUT", "TimeLimit")
    assert "DUE TO TIME LIMIT" in (killed / "slurm.out").read_text()
    assert cluster.squeue() == []

    with duckdb.connect(str(project / "data" / "campaign.duckdb"), read_only=True) as db:
        launches = dict(db.execute("select run_id, status from launches").fetchall())
        error = db.execute("select error_type, error_message from launches where run_id = $r",
                       {"r": killed.name}).fetchone()
        points = db.execute("select workload, concurrency, sent, completed from bench_points "
                        "where run_id = $r order by concurrency", {"r": done.name}).fetchall()
        gate = db.execute("select score from gates where run_id = $r", {"r": done.name}).fetchall()
        current = db.execute("select spec, run_status from runs where is_current order by spec").fetchall()
    assert launches == {done.name: "ready", killed.name: "failed"}
    assert error[0] == "Slurm" and "TIMEOUT (TimeLimit)" in error[1]
    assert points == [("chat", 1, 2, 2), ("chat", 4, 8, 8)]       # as the local run of this spec
    assert len(gate) == 1
    assert current == [("tiny-seqs4", "complete"), ("tiny-timeout", "failed")]
    site = project / "data" / "site"
    pages = html.unescape(" ".join(p.read_text(errors="replace") for p in site.rglob("*.html")))
    assert done.name in pages and "TIMEOUT (TimeLimit)" in pages
    assert not engine_processes(JOB_PORTS)


@pytest.mark.slow
def test_an_interrupt_cancels_the_jobs_and_marks_the_run(project: Path, cluster):
    env = job_env(cluster.env)
    proc = subprocess.Popen([sys.executable, "-m", "stages.cli", "schedule", "--executor", "slurm",
                             "tiny-seqs16"], cwd=project, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    ledger_dir = project / "data" / "ledger" / "slurm"
    before = set(p.name for p in ledger_dir.iterdir())
    deadline = time.monotonic() + 300
    folder = None
    while time.monotonic() < deadline:          # wait until its engine is up
        new = [p for p in ledger_dir.iterdir() if p.name not in before]
        if new:
            folder = project / "data" / "runs" / new[0].name.removesuffix(".out")
            if (folder / "launch.out").exists() and "status=ready" in (folder / "launch.out").read_text():
                break
        assert proc.poll() is None, proc.communicate()
        time.sleep(1)
    else:
        proc.kill()
        raise AssertionError("the engine did not become ready within 300 s")
    assert cluster.squeue() and engine_processes(JOB_PORTS)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 2 and "cancelling jobs" in err and "jobs submitted were cancelled" in err
    assert cluster.squeue() == []
    assert not engine_processes(JOB_PORTS)
    facts = launch_out(folder)
    assert facts["run_status"] == "interrupted" and facts["slurm_state"] == "CANCELLED"
    assert (folder / "MANIFEST.sha256").exists()
    ledger = json.loads((project / "data" / "ledger" / "schedule.json").read_text())["specs"]
    assert "tiny-seqs16" not in ledger                         # tried again next time


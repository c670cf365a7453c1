"""End to end on the real local engine, as a user and an auditor would do it.

A copy of the project (its tracked and untracked files) in a temporary folder, with one spec,
one workload and two concurrency levels: `dvc repro` runs model, run, ingest, derive and render;
every fact in the article resolves to a raw line holding its source text; `campaign archive`
pushes the run folders to a local DVC remote, and from a fresh clone `dvc pull` followed by
`campaign trace --verify` recomputes a fact from the raw files. About two minutes on 2 cores.
"""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import yaml

from helpers.pipeline_project import copy_project, engine_processes, sh, small_params
from stages.render.evidence import read_line

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    copy_project(root)
    (root / "params.yaml").write_text(yaml.safe_dump(small_params(), sort_keys=False))
    sh("git", "init", "-q", cwd=root)
    sh("git", "add", "-A", cwd=root)
    sh("git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "project", cwd=root)
    out = sh("dvc", "repro", cwd=root)
    assert "Running stage 'render'" in out.stdout
    # what the run's libraries print on their way out is kept off the console, in the ledger
    assert "nanobind" not in out.stdout + out.stderr
    assert (root / "data" / "ledger" / "tiny-seqs4.exit.log").is_file()
    return root


def test_repro_runs_the_engine_and_builds_the_site(project: Path):
    ledger = json.loads((project / "data" / "ledger" / "tiny-seqs4.json").read_text())
    run_id = ledger["run_id"]
    assert (ledger["status"], ledger["run_status"], ledger["points"]) == ("ready", "complete", 4)
    folder = project / "data" / "runs" / run_id
    assert {p.name for p in folder.iterdir()} >= {"cmd.sh", "server.log", "launch.out", "meta.json",
                                                   "niah.log", "bench", "MANIFEST.sha256", "ramp.log",
                                                   "agents.agents.jsonl"}
    launch = dict(line.split("=", 1) for line in (folder / "launch.out").read_text().splitlines())
    assert launch["status"] == "ready" and int(launch["engine_kv_tokens"]) > 0
    assert launch["prefix_cache_resets"] == "4"           # emptied before each point, ramp and agents
    assert "Application startup complete" in (folder / "server.log").read_text()
    # the gate ran at three depths, each prompt near 90% of the 4,096-token context
    probes = [json.loads(line) for line in (folder / "niah.log").read_text().splitlines()[:-1]]
    assert [p["depth"] for p in probes] == [0.1, 0.5, 0.9]
    assert all(3000 < p["prompt_tokens"] <= 4096 for p in probes)
    result = json.loads((folder / "bench" / "chat__c04.json").read_text())
    assert result["completed"] == 8 and len(result["ttfts"]) == 8
    assert (folder / "bench" / "chat__c04.metrics.after.txt").read_text().count("vllm:") > 10
    # the /metrics sampler's series beside each point's result, and around each multi-turn workload
    for point in ("chat__c01", "chat__c04", "ramp", "agents"):
        series = (folder / "bench" / f"{point}.metrics-series.txt").read_text().splitlines()
        assert series[0] == f"# point={point}" and series[-1] == "# sampler_exit=ok"
        assert sum(line.startswith("@ ") for line in series) >= 1
        assert any(line.startswith("vllm:num_requests_running{") for line in series)
        assert not any(line.startswith("# HELP") for line in series)
    # the profiled point (chat's `profile: [4]`): the engine's trace moved into profile/, named
    # after the point, and nothing left in the profiler's scratch folder
    # (and the CPU worker's table of operator totals beside its trace)
    kept = sorted(p.name for p in (folder / "profile").iterdir())
    traces = [k for k in kept if k.endswith(".pt.trace.json.gz")]
    assert traces and all(k.startswith("chat__c04.rank0.") for k in kept)
    assert [k for k in kept if k not in traces] == ["chat__c04.rank0.profiler_out.txt"]
    assert launch["profile"] == "chat__c04 " + " ".join(f"profile/{k}" for k in kept)
    assert "profile_error" not in launch
    assert not engine_processes(range(8019, 8020))      # nothing left running

    with duckdb.connect(str(project / "data" / "campaign.duckdb"), read_only=True) as db:
        launches = db.sql("select status, kv_tokens from launches").fetchall()
        points = db.sql("select concurrency, sent, completed, ttft_median_s, capacity_limited "
                        "from bench_points order by concurrency").fetchall()
        gate = db.sql("select score, provisional from gates").fetchall()
        turns = db.sql("select turn, answered, needle_found, context_tokens, cache_hit_pct "
                       "from ramp_turns order by turn").fetchall()
        agents = db.sql("select sessions, sent, completed from agent_runs").fetchall()
        profiled = db.sql("select point_id, sum(share_pct), sum(events) from point_profile "
                          "group by point_id").fetchall()
    ramp = [t[:3] for t in turns]
    contexts = [t[3] for t in turns]
    cached = [t[4] for t in turns]
    assert launches == [("ready", int(launch["engine_kv_tokens"]))]
    assert [(c, s, n) for c, s, n, _, _ in points] == [(1, 2, 2), (4, 8, 8)]
    assert all(t > 0 for *_, t, _ in points)
    assert [cap for *_, cap in points] == [False, False]   # cap 4: concurrency 4 still fits
    assert gate == [(0.0, True)]                          # dummy weights miss the needle
    assert ramp == [(1, 1, 0), (2, 1, 0), (3, 1, 0)]      # one session per turn, the needle missed
    assert 400 < contexts[0] < contexts[1] < contexts[2] <= 2048 + 64   # the conversation grew
    assert cached[0] == 0 and all(c > 30 for c in cached[1:])   # later turns re-read from cache
    assert agents == [(2, 4, 4)]
    assert [(p, round(share, 6)) for p, share, _ in profiled] == [("chat__c04", 100.0)]
    assert profiled[0][2] > 100                           # the CPU engine's operators, counted
    assert (project / "data" / "site" / "index.html").exists()

    again = sh("dvc", "repro", cwd=project).stdout
    assert "Data and pipelines are up to date" in again


def test_every_fact_resolves_to_its_raw_line(project: Path):
    facts = json.loads((project / "data" / "facts.json").read_text())
    traced = [f for f in facts if f["source_file"]]
    assert len(traced) > 10
    assert all(read_line(project, f["source_file"], f["source_line"]) == f["excerpt"] for f in traced)
    out = sh("campaign", "trace", traced[0]["id"], cwd=project).stdout
    assert f"{traced[0]['source_file']}:{traced[0]['source_line']}" in out


def test_auditor_pulls_the_raw_runs_and_verifies_a_fact(project: Path, tmp_path):
    remote = tmp_path / "remote"
    sh("dvc", "remote", "add", "-d", "audit", str(remote), cwd=project)
    summary = sh("campaign", "archive", cwd=project).stdout
    assert "pushed=True" in summary
    sh("git", "add", "-A", cwd=project)
    sh("git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "campaign", cwd=project)

    same = sh("campaign", "diff", "--facts", "--base", "HEAD", "--head", "workspace", cwd=project)
    assert "0 published numbers differ between HEAD and workspace" in same.stdout

    clone = tmp_path / "clone"
    sh("git", "clone", "-q", str(project), str(clone), cwd=tmp_path)
    sh("dvc", "pull", "-q", cwd=clone)
    facts = json.loads((clone / "data" / "facts.json").read_text())
    kv = next(f for f in facts if f["name"] == "launch_kv_tokens")
    out = sh("campaign", "trace", "--verify", kv["id"], cwd=clone)
    assert "verify    OK" in out.stdout

"""End to end on the real local engine: model, run (launch, gate, two points), ingest, derive, render.

Kept short: one spec, one workload, two concurrency levels. It takes about two minutes on 2 cores.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from stages.cli import main
from stages.engine import group_members

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.engine


def small_params() -> dict:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["run_specs"] = ["tiny-seqs4"]
    params["profiles"]["local-cpu"]["port"] = 8019
    params["specs"]["tiny-seqs4"]["workloads"] = ["chat"]
    params["workloads"]["chat"]["concurrency"] = [1, 4]
    return params


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    (root / "params.yaml").write_text(yaml.safe_dump(small_params(), sort_keys=False))
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(ROOT / "site", root / "site")
    return root


def invoke(*args: str):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_end_to_end(project: Path):
    r = str(project)
    invoke("model", "--root", r)
    out = invoke("run", "tiny-seqs4", "--root", r).output
    run_id, status, run_status, points = out.split()[-4:]
    assert (status, run_status, points) == ("ready", "complete", "points=2")

    folder = project / "data" / "runs" / run_id
    assert {p.name for p in folder.iterdir()} >= {"cmd.sh", "server.log", "launch.out",
                                                   "meta.json", "niah.log", "bench"}
    launch = dict(line.split("=", 1) for line in (folder / "launch.out").read_text().splitlines())
    assert launch["status"] == "ready" and int(launch["engine_kv_tokens"]) > 0
    assert "Application startup complete" in (folder / "server.log").read_text()
    # the gate ran at three depths, each prompt near 90% of the 4,096-token context
    probes = [json.loads(line) for line in (folder / "niah.log").read_text().splitlines()[:-1]]
    assert [p["depth"] for p in probes] == [0.1, 0.5, 0.9]
    assert all(3000 < p["prompt_tokens"] <= 4096 for p in probes)
    result = json.loads((folder / "bench" / "chat__c04.json").read_text())
    assert result["completed"] == 8 and len(result["ttfts"]) == 8
    assert (folder / "bench" / "chat__c04.metrics.after.txt").read_text().count("vllm:") > 10
    ledger = json.loads((project / "data" / "ledger" / "tiny-seqs4.json").read_text())
    assert ledger["run_id"] == run_id
    # nothing of the engine is left running
    assert not [p for p in _engine_processes() if "8019" in p]

    invoke("ingest", "--root", r)
    invoke("derive", "--root", r)
    with duckdb.connect(str(project / "data" / "campaign.duckdb"), read_only=True) as db:
        launches = db.sql("select status, kv_tokens from launches").fetchall()
        points = db.sql("select concurrency, sent, completed, ttft_median_s, capacity_limited "
                        "from bench_points order by concurrency").fetchall()
        gate = db.sql("select score, provisional from gates").fetchall()
    assert launches == [("ready", int(launch["engine_kv_tokens"]))]
    assert [(c, s, n) for c, s, n, _, _ in points] == [(1, 2, 2), (4, 8, 8)]
    assert all(t > 0 for *_, t, _ in points)
    assert [cap for *_, cap in points] == [False, False]   # cap 4: concurrency 4 still fits
    assert gate == [(0.0, True)]                          # dummy weights miss the needle

    invoke("render", "--root", r)
    index = project / "data" / "site" / "index.html"
    assert index.exists()
    facts = json.loads((project / "data" / "facts.json").read_text())
    assert any(run_id in (f.get("run_ids") or []) for f in facts)
    # every fact resolves to a raw file and line that still holds its source text
    from stages.facts import read_line
    traced = [f for f in facts if f["source_file"]]
    assert traced and all(read_line(project, f["source_file"], f["source_line"]) == f["excerpt"]
                          for f in traced)
    kv = next(f for f in facts if f["name"] == "launch_kv_tokens")
    out = invoke("trace", "--verify", kv["id"], "--root", r).output
    assert "server.log:" in out and "verify    OK" in out


def _engine_processes() -> list[str]:
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "vllm.entrypoints" in cmd:
                out.append(cmd)
    return out

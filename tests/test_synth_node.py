"""The scripted node campaign: generated the same way every time, committed as the fixture, and
read by ingest and derive as the real node's runs would be."""
from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from stages.core.config import CampaignError, derive_settings, load_params
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.tools.synth import synth_node

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "node_campaign" / "runs"
GLM_CRASH = "glm53__tp8_dcp8__1024k__vllm__1116-060000"
GLM = "glm53__tp8_dcp8__1024k__vllm__1116-062500"
MINIMAX_STABLE = "minimax_m3__tep8__1024k__vllm__1116-091000"
MINIMAX = "minimax_m3__fx_tep8_recipe__1024k__vllm__1116-093000"
DSV4_DEP = "dsv4_pro__dep8__781k__vllm__1116-110000"
DSV4 = "dsv4_pro__tep8__781k__vllm__1116-112000"
QWEN_STABLE = "qwen3_235b__tp4__256k__vllm__1116-130000"
QWEN_NIGHTLY = "qwen3_235b__tp4__256k__vllm__1116-140000"


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "runs"
    synth_node.run(out_dir=out, root=ROOT)
    return out


def test_generation_is_deterministic(fresh: Path, tmp_path: Path):
    synth_node.run(out_dir=tmp_path / "again", root=ROOT)
    assert _tree(tmp_path / "again") == _tree(fresh)


def test_committed_fixture_is_a_fresh_generation(fresh: Path):
    committed, made = _tree(FIXTURE), _tree(fresh)
    assert sorted(committed) == sorted(made)
    changed = [name for name in made if committed[name] != made[name]]
    assert changed == [], f"regenerate with `campaign synth-node`: {changed[:5]}"
    assert sum(len(b) for b in committed.values()) < 3 * 2**20


def test_cli_writes_the_campaign_and_refuses_to_overwrite(tmp_path: Path):
    cmd = [sys.executable, "-m", "stages.cli", "synth-node", "--out", str(tmp_path / "runs"),
           "--root", str(ROOT)]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == [GLM_CRASH, GLM, MINIMAX_STABLE, MINIMAX, DSV4_DEP, DSV4, QWEN_STABLE,
                                    QWEN_NIGHTLY]
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "already exists" in again.stderr


def test_files_have_the_run_stage_shapes():
    crash = FIXTURE / GLM_CRASH
    assert "--dcp-comm-backend" not in (crash / "cmd.sh").read_text()
    assert "--dcp-comm-backend ag_rs" in (FIXTURE / GLM / "cmd.sh").read_text()
    assert not (crash / "bench").exists() and (crash / "MANIFEST.sha256").exists()
    assert "run_status=failed" in (crash / "launch.out").read_text().splitlines()
    log = (FIXTURE / GLM / "server.log").read_text()
    assert "Engine 000: Avg prompt throughput:" in log and "Application startup complete." in log
    names = {p.name for p in (FIXTURE / GLM / "bench").iterdir()}
    assert {"doc-1m__c01.json", "doc-1m__c01.cmd", "doc-1m__c01.out", "doc-1m__c01.metrics.before.txt",
            "doc-1m__c01.metrics.after.txt", "ramp-1m__t10.metrics.after.txt"} <= names
    assert (FIXTURE / GLM / "ramp.log").exists() and (FIXTURE / MINIMAX / "agents.agents-200k.jsonl").exists()


# ---------------------------------------------------------------- ingest and derive of a copy

@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project whose data/runs is a copy of the fixture, ingested and derived."""
    root = tmp_path_factory.mktemp("project")
    runs = root / "data" / "runs"
    shutil.copytree(FIXTURE, runs)
    summary = ingest.run(runs_dir=runs, warehouse=root / "data" / "warehouse.duckdb", root=root)
    assert summary["runs_read"] == 8 and summary["errors"] == 0
    out = root / "data"
    derive.run(warehouse=out / "warehouse.duckdb", campaign_db=out / "campaign.duckdb",
               derived_dir=out / "derived", metrics_file=out / "metrics.json",
               **derive_settings(load_params(ROOT)))
    return out


@pytest.fixture(scope="module")
def campaign(project: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(project / "campaign.duckdb"), read_only=True)
    yield con
    con.close()


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def test_no_ingest_errors_and_every_run_of_the_node(campaign):
    assert rows(campaign, "select * from ingest_errors") == []
    runs = rows(campaign, "select profile, executor, recovered from runs")
    assert len(runs) == 8
    assert {(r["profile"], r["executor"], r["recovered"]) for r in runs} == {("h200x8", "docker", False)}


def test_failed_launches_name_their_error(campaign):
    got = {r["run_id"]: r for r in rows(campaign, "select * from launches where status = 'failed'")}
    assert set(got) == {GLM_CRASH, MINIMAX_STABLE, DSV4_DEP}
    glm = got[GLM_CRASH]
    assert glm["error_type"] == "NotImplementedError" and "--dcp-comm-backend ag_rs" in glm["error_message"]
    assert glm["error_worker"].startswith("Worker_TP2_DCP2")
    assert glm["error_source_file"] == f"data/runs/{GLM_CRASH}/server.log"
    log = (FIXTURE / GLM_CRASH / "server.log").read_text().splitlines()
    assert log[glm["error_source_line"] - 1].endswith(glm["error_message"])
    assert got[MINIMAX_STABLE]["error_type"] == "RuntimeError"
    assert "kv_cache_dtype fp8" in got[MINIMAX_STABLE]["error_message"]
    assert got[MINIMAX_STABLE]["error_worker"].startswith("Worker_TP0_EP0")
    dep = got[DSV4_DEP]
    assert dep["error_type"] == "ValueError"
    assert "No available memory for the cache blocks" in dep["error_message"]
    assert dep["kv_cache_gib"] < 0 and dep["engines"] == 8 and dep["kv_tokens"] is None


def test_ready_launches_report_their_startup(campaign):
    got = {r["run_id"]: r for r in rows(campaign, "select * from launches where status = 'ready'")}
    assert set(got) == {GLM, MINIMAX, DSV4, QWEN_STABLE, QWEN_NIGHTLY}
    glm = got[GLM]
    assert (glm["kv_tokens"], glm["weights_gib"], glm["kv_cache_gib"]) == (3_981_312, 88.41, 31.62)
    assert got[GLM]["kv_source_file"] == f"data/runs/{GLM}/server.log"
    assert got[MINIMAX]["moe_backend"] == "FLASHINFER_CUTLASS" and got[DSV4]["moe_backend"] == "DEEPGEMM"
    assert got[QWEN_STABLE]["moe_backend"] == "TRITON"
    assert got[QWEN_NIGHTLY]["moe_backend"] == "FLASHINFER_CUTLASS"
    assert all(r["kv_tokens"] > 0 and r["weights_gib"] > 0 and r["kv_cache_gib"] > 0 for r in got.values())


def test_gates_and_images(campaign):
    gates = {r["run_id"]: r for r in rows(campaign, "select * from gates")}
    minimax = gates[MINIMAX]
    assert (minimax["passed_probes"], minimax["probes"], minimax["provisional"]) == (2, 3, True)
    assert all(g["passed_probes"] == 3 for run, g in gates.items() if run != MINIMAX)
    images = {r["run_id"]: r["image"]
              for r in rows(campaign, "select run_id, image from runs where spec = $1", ["qwen3-235b-tp4"])}
    assert images[QWEN_STABLE] == "vllm/vllm-openai:v0.31.0"
    assert images[QWEN_NIGHTLY].startswith("vllm/vllm-openai:nightly-")
    attempts = rows(campaign, "select run_id, attempt, is_current from runs where spec = $1 order by attempt",
                    ["glm53-tp8-dcp8"])
    assert [(r["run_id"], r["is_current"]) for r in attempts] == [(GLM_CRASH, False), (GLM, True)]


def test_points_capacity_and_cache(campaign):
    points = {(r["run_id"], r["point_id"]): r for r in rows(campaign, "select * from bench_points")}
    limited = {key for key, r in points.items() if r["capacity_limited"]}
    assert limited == {(MINIMAX, "short-1k__c64"), (DSV4, "doc-256k__c16")}
    assert points[(MINIMAX, "short-1k__c64")]["seq_limit"] == 16
    glm_prompts = {r["prompt_tokens"] for (run, _), r in points.items() if run == GLM}
    assert glm_prompts >= {1024, 256000, 512000, 1000000}
    cached = points[(DSV4, "doc-256k__c01")]
    assert cached["cache_hit_pct"] > 20
    assert all(r["cache_hit_pct"] == 0 for key, r in points.items() if key != (DSV4, "doc-256k__c01"))
    invalid = rows(campaign, "select * from invalid_rows where reason = 'prefix_cache'")
    assert [(r["run_id"], r["point_id"], r["request_idx"]) for r in invalid] == [(DSV4, "doc-256k__c01", 1)]
    assert invalid[0]["value"] > invalid[0]["threshold"] == 60000
    others = rows(campaign, "select distinct reason from invalid_rows")
    assert {r["reason"] for r in others} == {"prefix_cache", "cached_share"}


def test_conversations(campaign):
    ramp = rows(campaign, "select * from ramp_turns where run_id = $1 order by turn", [GLM])
    assert len(ramp) == 10 and all(r["needle_found"] == 1 for r in ramp)
    assert ramp[-1]["context_tokens"] > 950_000
    agents = rows(campaign, "select * from agent_runs")
    assert [(r["run_id"], r["sessions"], r["completed"]) for r in agents] == [(MINIMAX, 8, 32)]


def test_stats_lines_fall_within_each_point(project: Path):
    """Every point's result date has the engine's stats lines of that point just before it."""
    con = duckdb.connect(str(project / "warehouse.duckdb"), read_only=True)
    try:
        stats = con.execute("select run_id, log_time, prompt_tok_s, gen_tok_s from raw_log_stats").fetchall()
        points = con.execute("select run_id, point_id, date, duration_s from raw_bench_points").fetchall()
    finally:
        con.close()
    assert len(points) == 23
    seen: dict[str, list[tuple[datetime, float]]] = {}
    for run_id, log_time, prompt, gen in stats:
        when = datetime.strptime(f"2026-{log_time}", "%Y-%m-%d %H:%M:%S")
        seen.setdefault(run_id, []).append((when, prompt + gen))
    for run_id, point_id, date, duration in points:
        end = datetime.strptime(date, "%Y%m%d-%H%M%S")
        lo, hi = end - timedelta(seconds=duration + 1), end + timedelta(seconds=11)
        inside = [busy for t, busy in seen[run_id] if lo <= t <= hi]
        assert inside and max(inside) > 0, (run_id, point_id)


def test_a_point_params_no_longer_plans_is_a_user_error(tmp_path: Path):
    text = (ROOT / "params.yaml").read_text()
    plan = "      prompt_tokens: 1024\n      output_tokens: 1024\n      concurrency: [1, 8, 64]\n"
    assert plan in text
    (tmp_path / "params.yaml").write_text(text.replace(plan, plan.replace("[1, 8, 64]", "[1, 8]")))
    with pytest.raises(CampaignError, match="short-1k at concurrency 64"):
        synth_node.run(out_dir=tmp_path / "runs", root=tmp_path)


def test_each_point_has_its_gpu_energy_and_the_silent_gpu_is_flagged(campaign):
    energy = {(r["run_id"], r["point_id"]): r for r in rows(campaign, "select * from point_energy")}
    points = rows(campaign, "select run_id, point_id from bench_points")
    assert {(p["run_id"], p["point_id"]) for p in points} <= set(energy)
    assert (GLM, "ramp-1m") in energy and (MINIMAX, "agents-200k") in energy   # multi-turn steps too
    silent = energy.pop((GLM, "decode-32k__c04"))
    assert silent["energy_valid"] is False and silent["energy_j"] is None
    assert silent["j_per_output_token"] is None and silent["energy_problem"] == "GPU 5 has no samples"
    assert silent["gpus_in_set"] == 8 and silent["gpus_sampled"] == 7
    assert all(r["energy_valid"] for r in energy.values()), [r["energy_problem"] for r in energy.values()]
    for r in energy.values():
        assert 100 < r["avg_power_per_gpu_w"] < 700
        assert r["energy_j"] == pytest.approx(r["avg_power_per_gpu_w"] * r["gpus_in_set"] * r["window_s"],
                                              rel=0.1)
    qwen = energy[(QWEN_STABLE, "short-1k__c08")]
    assert qwen["gpus"] == "0,1,2,3" and qwen["gpus_in_set"] == 4
    # more users, more power: the node draws more per GPU at eight users than at one
    glm = {p: energy[(GLM, p)]["avg_power_per_gpu_w"] for p in ("short-1k__c01", "short-1k__c08")}
    assert glm["short-1k__c08"] > glm["short-1k__c01"] + 50
    sweep = [r for r in energy.values() if r["output_tokens"]]
    assert all(r["j_per_output_token"] == pytest.approx(r["energy_j"] / r["output_tokens"]) for r in sweep)


def test_energy_facts_cite_their_gpus_and_result_file(project, campaign):
    from stages.render import inputs
    from stages.render.facts import FactBook

    book = FactBook(campaign, root=project.parent, sha=None)
    point = {"run_id": GLM, "workload": "short-1k", "concurrency": 8}
    row = rows(campaign, "select * from point_energy where run_id = ? and point_id = 'short-1k__c08'",
               [GLM])[0]
    energy = book.evaluate("point_energy_j", point)
    power = book.evaluate("point_avg_power_per_gpu_w", point)
    total = book.evaluate("point_avg_power_total_w", point)
    tokens = book.evaluate("point_energy_output_tokens", point)
    per_token = book.evaluate("point_j_per_output_token", point)
    assert (energy.unit, power.unit, per_token.unit) == ("J", "W", "J/token")
    assert energy.value == pytest.approx(row["energy_j"])
    assert total.value == pytest.approx(row["avg_power_total_w"])
    assert energy.statistic == "sum" and len(energy.input_rows) == 8 and power.statistic == "mean"
    assert all(r["file"] == f"data/runs/{GLM}/gpu/short-1k__c08.csv" for r in energy.input_rows)
    assert inputs.recompute("sum", energy.input_rows) == pytest.approx(energy.value)
    assert inputs.recompute("mean", power.input_rows) == pytest.approx(power.value)
    assert tokens.value == row["output_tokens"]
    assert tokens.source_file == f"data/runs/{GLM}/bench/short-1k__c08.json"
    assert per_token.value == pytest.approx(energy.value / tokens.value) and per_token.run_ids == [GLM]
    silent = book.evaluate("point_energy_j", {"run_id": GLM, "workload": "decode-32k", "concurrency": 4})
    assert silent.value is None and inputs.recompute("sum", silent.input_rows) is None
    assert [r["reason"] for r in silent.input_rows if r["reason"]] == ["GPU 5 has no samples"]
    assert book.evaluate("point_j_per_output_token",
                         {"run_id": GLM, "workload": "decode-32k", "concurrency": 4}).value is None
    # their audit entries list the GPUs they rest on, saying how the value follows from them
    from stages.render import audit
    assert "the sum of the values used" in "".join(audit.inputs_table(energy))
    assert "the mean of the values used" in "".join(audit.inputs_table(power))
    assert set(inputs.STATISTICS) <= set(audit.STATISTIC_WORDS)

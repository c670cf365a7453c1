"""Planning before the node is booked (stages/planning/,
stages/plan/, the scheduler's check): the memory arithmetic on generated configs of every attention
kind the campaign meets, and every real GPU run the project commits beside its plan."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

import duckdb

from stages.planning import capacity, plans
from stages.planning import inputs as plan_inputs
from stages.core.generated_model import generated_config
from stages.core.config import CampaignError
from stages.run import fit_check, schedule

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
H200_GIB = PARAMS["profiles"]["h200x1"]["plan"]["gpu_memory_gib"]

# DeepSeek-V3's published shape: MLA (a 512-wide latent and 64 rotary dimensions), 256 routed
# experts and one shared, the first 3 layers dense; 671B parameters.
DEEPSEEK_V3 = dict(architectures=["DeepseekV3ForCausalLM"], hidden_size=7168, num_hidden_layers=61,
                   num_attention_heads=128, num_key_value_heads=128, vocab_size=129280,
                   intermediate_size=18432, moe_intermediate_size=2048, n_routed_experts=256,
                   n_shared_experts=1, first_k_dense_replace=3, kv_lora_rank=512, qk_rope_head_dim=64,
                   q_lora_rank=1536, qk_nope_head_dim=128, v_head_dim=128, torch_dtype="bfloat16",
                   max_position_embeddings=163840)
# A MoE model with a large dense part: 120 layers of hidden 8192 with grouped-query attention, the
# first 80 with a 28,672-wide dense MLP (77B parameters dense in all), the other 40 with 16 experts
# each (129B), in bf16.
DENSE_HEAVY_MOE = dict(architectures=["MixtralForCausalLM"], hidden_size=8192, num_hidden_layers=120,
                       num_attention_heads=64, num_key_value_heads=8, vocab_size=128256,
                       intermediate_size=28672, moe_intermediate_size=8192, num_local_experts=16,
                       first_k_dense_replace=80, torch_dtype="bfloat16", max_position_embeddings=131072)


def layout(**flags) -> capacity.Layout:
    return capacity.layout_from_args("vllm", {f"--{k.replace('_', '-')}": v for k, v in flags.items()})


def test_grouped_query_pool_matches_the_h200_log():
    """llama-1b on one H200: the log says 125.82 GiB asked, 2.15 GiB of weights, 123.01 GiB of KV
    cache, 1,343,552 tokens; the reserve it kept is what is left (0.66 GiB)."""
    shape = capacity.shape_from_config(generated_config(PARAMS["models"]["llama-1b"]))
    assert shape.attention == "GQA"
    lay = layout(max_model_len=32768, gpu_memory_utilization=0.9)
    assert capacity.kv_bytes_per_token(shape, lay) == 24 * 2 * 8 * 128 * 2
    logged = capacity.plan(shape, lay, gpu_memory_gib=H200_GIB, reserve_gib=125.82 - 2.15 - 123.01)
    assert abs(logged.weights_gib - 2.15) / 2.15 < 0.01
    assert abs(logged.pool_tokens - 1_343_552) / 1_343_552 < 0.001
    assert logged.concurrency_x == pytest.approx(41.0, abs=0.05)          # "41.00x" in the log
    default = capacity.plan(shape, lay, gpu_memory_gib=H200_GIB, reserve_gib=1.0)
    assert abs(default.pool_tokens - 1_343_552) / 1_343_552 < 0.05 and default.verdict == "fits"


def test_fp8_halves_a_token_and_an_override_fixes_the_pool():
    shape = capacity.shape_from_config(generated_config(PARAMS["models"]["llama-1m"]))
    auto = layout(max_model_len=1048576)
    fp8 = layout(max_model_len=1048576, kv_cache_dtype="fp8", num_gpu_blocks_override=162500)
    assert capacity.kv_bytes_per_token(shape, fp8) * 2 == capacity.kv_bytes_per_token(shape, auto) == 1024
    p = capacity.plan(shape, fp8, gpu_memory_gib=H200_GIB, reserve_gib=1.0,
                      workloads={"doc-1m": 1_000_512, "doc-512k": 512_512, "doc-256k": 256_512})
    assert p.pool_tokens == 2_600_000 and p.fit == {"doc-1m": 2, "doc-512k": 5, "doc-256k": 10}
    # the rotary table of a million positions is most of what the engine loads (its log: 0.3 GiB)
    assert 0.25 < p.weights_gib < 0.3


def test_grouped_query_heads_split_over_tensor_ranks_and_are_kept_one_a_rank_beyond():
    shape = capacity.shape_from_config(generated_config(PARAMS["models"]["llama-1b"]))
    one = capacity.kv_bytes_per_token(shape, layout(max_model_len=4096))
    assert capacity.kv_bytes_per_token(shape, layout(max_model_len=4096, tensor_parallel_size=4)) == one / 4
    assert capacity.kv_bytes_per_token(shape, layout(max_model_len=4096, tensor_parallel_size=16)) == one / 8


def test_mla_keeps_one_latent_a_rank_and_context_parallelism_multiplies_the_pool():
    shape = capacity.shape_from_config(DEEPSEEK_V3)
    assert shape.attention == "MLA"
    assert capacity.param_counts(shape).total / 1e9 == pytest.approx(671.0, abs=0.5)
    tp8 = layout(tensor_parallel_size=8, enable_expert_parallel=True, max_model_len=163840,
                 kv_cache_dtype="fp8", gpu_memory_utilization=0.95)
    assert capacity.kv_bytes_per_token(shape, tp8) == 61 * (512 + 64)         # not split over ranks
    dcp = layout(tensor_parallel_size=8, decode_context_parallel_size=8, max_model_len=163840,
                 kv_cache_dtype="fp8", gpu_memory_utilization=0.95)
    fp8_checkpoint = 688_586_727_753                                          # its index's total_size
    a = capacity.plan(shape, tp8, gpu_memory_gib=139.8, reserve_gib=5, checkpoint_bytes=fp8_checkpoint)
    b = capacity.plan(shape, dcp, gpu_memory_gib=139.8, reserve_gib=5, checkpoint_bytes=fp8_checkpoint)
    assert a.verdict == b.verdict == "fits"
    assert b.pool_tokens == pytest.approx(8 * a.pool_tokens, rel=0.001)
    assert a.weights_gib == pytest.approx(fp8_checkpoint / 8 / capacity.GIB, rel=0.01)


def test_data_parallel_replicating_dense_weights_past_the_gpu_does_not_fit():
    shape = capacity.shape_from_config(DENSE_HEAVY_MOE)
    common = dict(enable_expert_parallel=True, max_model_len=131072, gpu_memory_utilization=0.95)
    tep8 = capacity.plan(shape, layout(tensor_parallel_size=8, **common), gpu_memory_gib=139.8, reserve_gib=5)
    dep8 = capacity.plan(shape, layout(data_parallel_size=8, **common), gpu_memory_gib=139.8, reserve_gib=5)
    assert tep8.verdict == "fits" and tep8.gpus == dep8.gpus == 8
    assert dep8.verdict == "does not fit" and dep8.kv_memory_gib < 0
    assert dep8.weights_gib > 0.95 * 139.8
    assert "data parallel: each GPU keeps" in dep8.why and f"weights {dep8.weights_gib:.2f} GiB" in dep8.why
    # experts are split over the 8 GPUs either way; what differs is the dense part
    assert dep8.weights_gib - tep8.weights_gib == pytest.approx(
        (capacity.param_counts(shape).total - capacity.param_counts(shape).experts) * 2 * 7 / 8
        / capacity.GIB, rel=0.01)


def test_a_pool_shorter_than_one_sequence_does_not_fit_and_a_thin_one_is_tight():
    shape = capacity.shape_from_config(generated_config(PARAMS["models"]["llama-1b"]))
    short = capacity.plan(shape, layout(max_model_len=32768, num_gpu_blocks_override=1000),
                          gpu_memory_gib=H200_GIB, reserve_gib=1)
    assert short.verdict == "does not fit" and "less than one 32,768-token sequence" in short.why
    thin = capacity.plan(shape, layout(max_model_len=32768, num_gpu_blocks_override=3000),
                         gpu_memory_gib=H200_GIB, reserve_gib=1)
    assert thin.verdict == "tight" and "1.46 sequences" in thin.why


# ------------------------------------------------------------- every real GPU run beside its plan

REAL_RUNS = {
    "llama-1b__gpu1_seqs64__32k__vllm__1202-160157": FIXTURES / "gpu_h200x1",
    "llama-1b__gpu1_seqs64__32k__vllm__1203-000918": FIXTURES / "gpu_h200x1_profiled",
    "llama-1m__gpu1_1m__1024k__vllm__1204-041729": FIXTURES / "gpu_h200x1_1m_first",
    "llama-1m__gpu1_1m__1024k__vllm__1204-082330": FIXTURES / "gpu_h200x1_1m",
    "llama-1b__gpu1_seqs64__32k__vllm__1204-122255": FIXTURES / "gpu_h200x1_lease",
    "llama-1m__gpu1_1m__1024k__vllm__1204-122655": FIXTURES / "gpu_h200x1_lease",   # 5 s after the one above
}


def campaign(cmd: list[str], root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stages.cli", *cmd, "--root", str(root)],
                          capture_output=True, text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("plan")
    shutil.copy(ROOT / "params.yaml", root / "params.yaml")
    runs = root / "data" / "runs"
    runs.mkdir(parents=True)
    for run_id, folder in REAL_RUNS.items():
        packed = folder / f"{run_id}.tar.gz"
        if packed.exists():
            with tarfile.open(packed) as tar:
                tar.extractall(runs, filter="tar")
        else:
            shutil.copytree(folder / run_id, runs / run_id)
    shutil.copytree(ROOT / "site", root / "site", dirs_exist_ok=True)
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    for step in (["ingest"], ["derive"], ["render", "--no-build"]):
        out = campaign(step, root)
        assert out.returncode == 0, out.stderr
    out = campaign(["plan", "--write", "llama1b-gpu1", "llama1m-gpu1"], root)
    assert out.returncode == 0, out.stderr
    con = duckdb.connect(str(root / "data" / "campaign.duckdb"), read_only=True)
    cur = con.execute("select * from launch_plans")
    launches = {r[0]: dict(zip([d[0] for d in cur.description], r)) for r in cur.fetchall()}
    con.close()
    specs = {p["spec"]: p for p in json.loads((root / "data" / "plan" / plans.SPECS_FILE).read_text())}
    facts = json.loads((root / "data" / "facts.json").read_text())
    page = (root / "data" / "docs" / "posts" / "part-one-gpu.md").read_text()
    return {"root": root, "launches": launches, "specs": specs, "said": out.stdout, "facts": facts,
            "page": page}


def test_every_real_run_has_its_plan(planned):
    assert sorted(planned["launches"]) == sorted(REAL_RUNS)
    for run_id, row in planned["launches"].items():
        assert row["verdict"] == "fits" and row["status"] == "ready", run_id


def test_the_planned_pool_is_within_5_percent_of_the_log_and_exact_under_an_override(planned):
    for run_id, row in planned["launches"].items():
        planned_kv, logged = row["planned_kv_tokens"], row["kv_tokens"]
        if run_id.startswith("llama-1m"):                     # --num-gpu-blocks-override 162500
            assert planned_kv == logged == 2_600_000, run_id
        else:
            assert abs(planned_kv - logged) / logged < 0.05, run_id
            assert "launches of vllm 0.26.0" in row["basis"]   # the reserve the other launches kept


def test_the_planned_run_time_is_within_25_percent_from_the_other_launch(planned):
    for run_id, row in planned["launches"].items():
        assert abs(row["run_err_pct"]) <= 25, (run_id, row["planned_run_s"], row["run_s"])
        assert re.search(r"parts from \d+ other launch(es)? of llama-1[bm] on vllm", row["basis"])
        assert row["run_err_pct"] == pytest.approx(
            (row["planned_run_s"] - row["run_s"]) / row["run_s"] * 100, abs=0.1)
        assert not row["failed_for_memory"] and not row["foreseen"]


def test_a_launch_right_after_another_on_the_machine_is_planned_as_a_warm_start(planned):
    """The second run of the lease was ready in 75.3 s, its kernels cached by the first; the plan
    takes its start from the profile's warm rate (no other launch started warm), the others' from
    the launches that started cold."""
    warm = planned["launches"]["llama-1m__gpu1_1m__1024k__vllm__1204-122655"]
    assert "a warm start" in warm["basis"] and warm["ready_s"] == pytest.approx(75.3)
    assert warm["planned_ready_s"] == PARAMS["profiles"]["h200x1"]["plan"]["rates"]["engine_start_warm_s"]
    cold = [r for k, r in planned["launches"].items() if k != "llama-1m__gpu1_1m__1024k__vllm__1204-122655"]
    assert all("a warm start" not in r["basis"] and r["planned_ready_s"] > 140 for r in cold)


def test_the_spec_plans_give_gpu_hours_and_cost_and_the_parts_totals(planned):
    one = planned["specs"]["llama1m-gpu1"]
    assert one["verdict"] == "fits" and one["kv_tokens"] == 2_600_000
    assert one["gpu_hours"] == pytest.approx(one["run_s"] / 3600)
    assert set(one["cost_usd"]) == set(PARAMS["prices"])
    said = planned["said"]
    assert "llama1m-gpu1  (llama-1m, 1 GPUs): FITS" in said
    assert "sequences that fit: short-1k 16, doc-256k 10, doc-512k 5, doc-1m 2" in said
    assert "Part 6: One GPU, a real engine: 2 specs" in said
    assert "a warm start" in planned["specs"]["llama1m-gpu1"]["basis"]   # it runs after llama1b-gpu1


def test_the_one_gpu_part_prints_each_launch_beside_its_plan_as_audited_facts(planned):
    assert planned["page"].count("### The plan against the launch") == 2      # llama-1b, llama-1m
    facts = [f for f in planned["facts"] if f["name"] == "plan_run_err_pct"]
    assert sorted(f["run_ids"][0] if isinstance(f["run_ids"], list) else f["run_ids"] for f in facts) == sorted(REAL_RUNS)
    for f in facts:
        row = planned["launches"][f["params"]["run_id"]]
        assert f["value"] == pytest.approx(row["run_err_pct"]) and f["source_note"]


# ------------------------------------------------------------- before a launch

def with_model(tmp_path: Path, name: str, config: dict) -> Path:
    folder = tmp_path / "models" / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return tmp_path / "models"


def node_params(**spec_changes) -> dict:
    params = json.loads(json.dumps(PARAMS))
    for name in ("dsv4-pro-dep8", "dsv4-pro-tep8"):
        params["specs"][name]["model"] = "moe-dense-heavy"
        params["specs"][name]["args"]["--max-model-len"] = 131072
        params["specs"][name]["workloads"] = ["short-1k", "decode-32k"]
        params["specs"][name].update(spec_changes)
    return params


def test_the_scheduler_refuses_a_spec_that_cannot_fit_before_any_launch(tmp_path):
    models = with_model(tmp_path, "moe-dense-heavy", DENSE_HEAVY_MOE)
    params = node_params()
    verdicts = fit_check.verdicts(params, ["dsv4-pro-tep8", "dsv4-pro-dep8", "glm53-tp8-dcp8"], models)
    assert verdicts["dsv4-pro-tep8"][0] == "fits" and verdicts["dsv4-pro-dep8"][0] == "does not fit"
    assert verdicts["glm53-tp8-dcp8"][0] == "not planned" and "no config.json" in verdicts["glm53-tp8-dcp8"][1]
    with pytest.raises(CampaignError) as refused:
        fit_check.refuse_unfit(params, ["dsv4-pro-tep8", "dsv4-pro-dep8"], models)
    lines = str(refused.value).splitlines()
    assert len(lines) == 1 and lines[0].startswith("dsv4-pro-dep8 does not fit: 0.95 x 139.80 GiB")
    said = []
    fit_check.refuse_unfit(node_params(force=True), ["dsv4-pro-dep8"], models, said.append)
    assert said and "launched: it says force: true" in said[0]
    # force does not change what the run measures, so a finished run is not launched again for it
    assert schedule.fingerprint(params, "dsv4-pro-dep8") == schedule.fingerprint(
        node_params(force=True), "dsv4-pro-dep8")


def test_run_specs_stops_before_launching_anything(tmp_path):
    params = node_params()
    params["profile"] = "h200x8"
    params["paths"]["models"] = str(with_model(tmp_path, "moe-dense-heavy", DENSE_HEAVY_MOE))
    with pytest.raises(CampaignError, match="dsv4-pro-dep8 does not fit"):
        schedule.run_specs(params, ["dsv4-pro-tep8", "dsv4-pro-dep8"], root=tmp_path,
                           ledger_dir=tmp_path / "ledger")
    assert not (tmp_path / "ledger" / schedule.LEDGER_FILE).exists()
    assert not list((tmp_path / "ledger").glob("*.out"))


def test_a_spec_without_est_minutes_takes_its_plan_time(tmp_path):
    params = json.loads(json.dumps(PARAMS))
    del params["specs"]["llama1m-gpu1"]["est_minutes"]
    rates = fit_check.minutes(params, ["llama1m-gpu1", "llama1b-gpu1"], tmp_path, None)
    assert list(rates) == ["llama1m-gpu1"] and 4 < rates["llama1m-gpu1"] < 30
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / plans.SPECS_FILE).write_text(json.dumps([{"spec": "llama1m-gpu1", "run_s": 600}]))
    assert fit_check.minutes(params, ["llama1m-gpu1"], tmp_path, tmp_path / "plan") == {"llama1m-gpu1": 10.0}
    jobs = schedule.jobs_from(params, ["llama1m-gpu1"], minutes={"llama1m-gpu1": 10.0})
    assert jobs[0].minutes == 10.0


def test_campaign_plan_prints_the_arithmetic_and_one_line_for_a_bad_name(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    params = node_params()
    params["paths"]["models"] = "models"
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with_model(root, "moe-dense-heavy", DENSE_HEAVY_MOE)
    out = campaign(["plan", "dsv4-pro-dep8", "dsv4-pro-tep8", "glm53-tp8-dcp8"], root)
    assert out.returncode == 0, out.stderr
    assert "dsv4-pro-dep8  (moe-dense-heavy, 8 GPUs): DOES NOT FIT" in out.stdout
    assert "dsv4-pro-tep8  (moe-dense-heavy, 8 GPUs): FITS" in out.stdout
    assert "glm53-tp8-dcp8  (glm53, 8 GPUs): NOT PLANNED" in out.stdout
    assert "does not fit: dsv4-pro-dep8 (dvc repro will not launch them" in out.stdout
    bad = campaign(["plan", "no-such-spec"], root)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "campaign: error: 'no-such-spec' is neither a spec nor a run set of params.yaml"


def test_a_missing_plan_setting_is_one_line():
    params = json.loads(json.dumps(PARAMS))
    del params["profiles"]["h200x1"]["plan"]
    with pytest.raises(CampaignError, match=r"profiles.h200x1.plan .* is not set"):
        plan_inputs.settings(params, "h200x1")


def test_sglang_flags_give_the_layout_and_a_hybrid_model_is_planned_by_its_weights_alone():
    lay = capacity.layout_from_args("sglang", {"--tp": 4, "--mem-fraction-static": 0.9,
                                               "--context-length": 262144, "--max-running-requests": 64})
    assert (lay.tp, lay.util, lay.max_len, lay.max_seqs, lay.block) == (4, 0.9, 262144, 64, 1)
    llama = generated_config(PARAMS["models"]["llama-1b"])
    hybrid = dict(llama, layer_types=["linear_attention", "full_attention"] * (llama["num_hidden_layers"] // 2))
    p = capacity.plan(capacity.shape_from_config(hybrid), layout(max_model_len=32768),
                      gpu_memory_gib=H200_GIB, reserve_gib=1)
    assert p.pool_tokens is None and p.verdict == "fits" and "not planned per token" in p.why

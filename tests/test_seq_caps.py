"""The sequence cap when a run's command gives none: the engine's own default for its engine,
version and device (stages/derive/sql/intermediate/engine_defaults.yaml, each entry citing
site/sources.yaml), the figure SGLang logs, else the profile's default_max_num_seqs."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
import yaml

from helpers.shared_folder import REAL_LOGS
from stages.core.config import CampaignError
from stages.derive import params_tables
from stages.derive import stage as derive
from stages.ingest import stage as ingest

ROOT = Path(__file__).resolve().parent.parent
SGLANG_LOG = REAL_LOGS / "sglang_01_ready_swa_prefill_decode.log"
RULES = {"prefix_cache_tok_s": 60000, "gate_min_score": 1.0, "cached_share_max_pct": 20,
         "default_max_num_seqs": 77, "burst_tpot_ms": 0.5, "cached_mark_pct": 10}
WORKLOADS = {"long": {"prompt_tokens": 1000, "output_tokens": 10, "concurrency": [1]}}
PROFILES = {"h200x8": {"rules": RULES, "workloads": WORKLOADS},
            "local-cpu": {"rules": {**RULES, "default_max_num_seqs": 55}, "workloads": WORKLOADS}}
DOCKER = "#!/bin/sh\ndocker run --rm {image} serve /models/m --tensor-parallel-size 8{extra}\n"
LOCAL = "#!/bin/sh\n.venv/bin/python -m vllm.entrypoints.openai.api_server --model m --tensor-parallel-size 2\n"
SGLANG = "#!/bin/sh\ndocker run --rm lmsysorg/sglang:v0.5.4 -m sglang.launch_server --model-path /models/m\n"
# run id -> (profile, engine, meta engine_version, image, cmd.sh, server.log text or None)
RUNS = {
    "m__tp8__4k__vllm__1201-010000": ("h200x8", "vllm", None, "vllm/vllm-openai:v0.31.0",
                                      DOCKER.format(image="vllm/vllm-openai:v0.31.0", extra=""), None),
    "m__tp8__4k__vllm__1201-020000": ("h200x8", "vllm", None, "vllm/vllm-openai:latest",
                                      DOCKER.format(image="vllm/vllm-openai:latest", extra=""),
                                      "INFO 12-01 02:00:01 [api_server.py:1] vLLM API server version 0.6.3.post1\n"),
    "m__tp8__4k__vllm__1201-030000": ("h200x8", "vllm", None, "vllm/vllm-openai:nightly-1a001d58",
                                      DOCKER.format(image="vllm/vllm-openai:nightly-1a001d58", extra=""), None),
    "m__tp8__4k__vllm__1201-040000": ("h200x8", "vllm", None, "vllm/vllm-openai:v0.31.0",
                                      DOCKER.format(image="vllm/vllm-openai:v0.31.0", extra=" --max-num-seqs 8"),
                                      None),
    "m__tp2__4k__vllm__1201-050000": ("local-cpu", "vllm", "0.32.0+cpu", None, LOCAL, None),
    "m__sglang__4k__sglang__1201-060000": ("h200x8", "sglang", None, "lmsysorg/sglang:v0.5.4", SGLANG, "real"),
}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture(scope="module")
def launches(tmp_path_factory) -> dict[str, tuple]:
    root = tmp_path_factory.mktemp("caps")
    for run_id, (profile, engine, version, image, cmd, log) in RUNS.items():
        folder = root / "data" / "runs" / run_id
        _write(folder / "cmd.sh", cmd)
        _write(folder / "launch.out", "status=ready\nready_s=10.0\n")
        _write(folder / "meta.json", json.dumps({
            "schema_version": 1, "run_id": run_id, "spec": run_id.split("__")[1], "spec_params": {},
            "profile": profile, "engine": engine, "engine_version": version, "image": image,
            "image_digest": None, "executor": "docker" if image else "local", "gpus": None,
            "model": "m", "layout": run_id.split("__")[1], "ctx_label": "4k", "git_sha": "abc",
            "params_hash": "p", "started_at": "2026-12-01T01:00:00Z"}))
        if log == "real":
            shutil.copyfile(SGLANG_LOG, folder / "server.log")
        elif log:
            _write(folder / "server.log", log)
    warehouse = root / "data" / "warehouse.duckdb"
    ingest.run(runs_dir=root / "data" / "runs", warehouse=warehouse, root=root)
    out = root / "data" / "campaign.duckdb"
    derive.run(warehouse=warehouse, campaign_db=out, derived_dir=root / "data" / "derived",
               metrics_file=root / "data" / "metrics.json", rules=RULES, workloads=WORKLOADS,
               profiles=PROFILES, strict=False)
    con = duckdb.connect(str(out), read_only=True)
    try:
        rows = con.execute("select run_id, seq_cap, seq_cap_default_source, seq_cap_source_file "
                           "from launches").fetchall()
    finally:
        con.close()
    return {r[0]: r[1:] for r in rows}


@pytest.mark.shared
def test_vllm_v1_on_an_h200_defaults_to_1024_read_from_the_image_tag(launches):
    assert launches["m__tp8__4k__vllm__1201-010000"] == (1024, "S12", None)


@pytest.mark.shared
def test_the_version_the_engine_logged_picks_the_v0_default(launches):
    assert launches["m__tp8__4k__vllm__1201-020000"] == (256, "S14", None)


@pytest.mark.shared
def test_no_known_version_takes_the_profiles_default(launches):
    assert launches["m__tp8__4k__vllm__1201-030000"] == (77, None, None)


@pytest.mark.shared
def test_a_flag_wins_over_every_default(launches):
    cap, source, file = launches["m__tp8__4k__vllm__1201-040000"]
    assert (cap, source) == (8, None) and file.endswith("/cmd.sh")


@pytest.mark.shared
def test_vllm_cpu_scales_its_default_with_tensor_parallel_size(launches):
    assert launches["m__tp2__4k__vllm__1201-050000"] == (256, "S12", None)


@pytest.mark.shared
def test_sglang_cap_is_the_figure_its_log_printed(launches):
    cap, source, file = launches["m__sglang__4k__sglang__1201-060000"]
    assert (cap, source) == (48, None) and file.endswith("/server.log")


def test_every_default_cites_a_listed_source_and_every_profile_has_a_device():
    doc = yaml.safe_load(params_tables.ENGINE_DEFAULTS.read_text())
    listed = {s["id"] for s in yaml.safe_load((ROOT / "site" / "sources.yaml").read_text())}
    assert {e["source"] for e in doc["seq_cap"]} <= listed
    assert set(yaml.safe_load((ROOT / "params.yaml").read_text())["profiles"]) == set(doc["devices"])


def test_a_default_without_a_source_is_a_user_error(tmp_path):
    bad = tmp_path / "engine_defaults.yaml"
    bad.write_text(yaml.safe_dump({"devices": {"h200x8": "gpu_70gib"},
                                   "seq_cap": [{"engine": "vllm", "device": "gpu_70gib", "cap": 1024}]}))
    with pytest.raises(CampaignError, match="source id"):
        params_tables.engine_default_rows(PROFILES, bad)
    assert len(params_tables.engine_default_rows(PROFILES)) == 3     # two for h200x8, one for local-cpu

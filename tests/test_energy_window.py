"""The energy window through `campaign run` on a stand-in engine (the stand-in docker) with the
stand-in nvidia-smi: the benchmark client times its own requests, the GPU sampler file records
that window beside its own, and derive counts a point's energy over the requests alone, within a
fraction of a second of the benchmark's own duration, the client's set-up left out."""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import duckdb
import pytest

from helpers.standin_helpers import ROOT, SHIPPED, project_copy, sh_all, standin_profile

PORT = 8056
FAKE_SMI = ROOT / "tests" / "fixtures" / "fake_nvidia_smi"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory, monkeypatch_module) -> dict:
    params = copy.deepcopy(SHIPPED)
    params["profile"] = "standin-energy"
    params["profiles"]["standin-energy"] = {**standin_profile(PORT), "gpu_sampler": {"interval_ms": 50}}
    params["workloads"]["standin-energy"] = {"tiny": {
        "description": "two short points", "prompt_tokens": 64, "output_tokens": 16,
        "concurrency": [1, 2], "prompts_per_user": 2}}
    params["specs"] |= {"sampled": {"profile": "standin-energy", "model": "tiny-llama", "layout": "sampled",
                                   "gpus": 1, "est_minutes": 1, "workloads": ["tiny"],
                                   "args": {"--max-model-len": 4096}, "gate": {"depths": [0.5]}}}
    params["run_specs"] = ["sampled"]
    root = project_copy(tmp_path_factory.mktemp("energy"), params)
    monkeypatch_module.setenv("PATH", f"{FAKE_SMI}:{__import__('os').environ['PATH']}")
    monkeypatch_module.setenv("FAKE_SMI_PYTHON", sys.executable)
    monkeypatch_module.setenv("FAKE_SMI_POWER", "0=300")
    sh_all(root, ["campaign", "model", "tiny-llama"], ["campaign", "run", "sampled"],
           ["campaign", "ingest"], ["campaign", "derive"], log=root / "docker.log")
    [folder] = (root / "data" / "runs").iterdir()
    db = duckdb.connect(str(root / "data" / "campaign.duckdb"), read_only=True)
    yield {"root": root, "folder": folder, "db": db}
    db.close()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_each_points_sampler_file_holds_its_requests_window(campaign):
    for point in ("tiny__c01", "tiny__c02"):
        text = (campaign["folder"] / "gpu" / f"{point}.csv").read_text()
        keys = [line[2:].split("=", 1)[0] for line in text.splitlines() if line.startswith("# ")]
        assert {"window_start", "window_end", "requests_start", "requests_end"} <= set(keys)
        assert keys.index("requests_start") < keys.index("requests_end")


def test_energy_is_counted_over_the_requests_not_the_clients_set_up(campaign):
    rows = campaign["db"].execute(
        "select point_id, window_from, window_s, sampler_window_s, bench_duration_s, energy_valid,"
        " energy_j, idle_power_total_w from point_energy order by point_id").fetchall()
    assert [r[0] for r in rows] == ["tiny__c01", "tiny__c02"]
    for point, source, window_s, sampler_s, duration_s, valid, joules, idle_w in rows:
        assert source == "requests" and valid, point
        assert abs(window_s - duration_s) < 0.25, (point, window_s, duration_s)
        assert sampler_s > window_s                      # the set-up and the test request are out
        assert joules == pytest.approx(300.0 * window_s, rel=1e-6)
        assert idle_w == pytest.approx(300.0)

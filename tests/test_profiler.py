"""The run stage's profiler on request (stages/run/profiler.py): which points are profiled, what the
engine is started with, the /start_profile and /stop_profile calls around a point, and the traces
moved into the run folder where ingest reads them. The real engine's profiled point is in
tests/test_pipeline_engine.py."""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from stages.core.config import CampaignError
from stages.core.params_check import check_params
from stages.ingest.parsers import profile_trace
from stages.run import profiler
from stages.run.executors import ContainerStepExecutor, DockerExecutor

FIXTURES = Path(__file__).parent / "fixtures" / "profile_trace"
CFG = profiler.settings({})


def test_settings_default_and_refuse_bad_values():
    assert CFG == profiler.Settings(delay_iterations=0, max_iterations=64, max_trace_mb=64)
    assert profiler.settings({"profiler": {"max_iterations": 8}}).max_iterations == 8
    for bad, says in [({"max_iterations": 0}, "positive"), ({"delay_iterations": -1}, "non-negative"),
                      ({"max_trace_mb": True}, "positive"), ({"window_s": 3}, "unknown setting")]:
        with pytest.raises(CampaignError, match=says):
            profiler.settings({"profiler": bad})


def test_a_workload_profiles_all_its_points_or_the_concurrencies_it_names():
    assert profiler.profiles({"profile": True}, 16)
    assert profiler.profiles({"profile": [1, 4]}, 4) and not profiler.profiles({"profile": [1, 4]}, 16)
    assert not profiler.profiles({}, 4) and not profiler.profiles({"profile": False}, 4)
    assert profiler.wanted({"a": {}, "b": {"profile": [2]}})
    assert not profiler.wanted({"a": {}, "b": {"profile": False}})


def test_params_refuse_a_bad_profile_flag():
    import yaml
    params = yaml.safe_load((Path(__file__).parent.parent / "params.yaml").read_text())
    params["workloads"]["local-cpu"]["chat"]["profile"] = "yes"
    problems = check_params(params)
    assert any("chat.profile must be true, false or a list of concurrencies, not 'yes'" in p
               for p in problems)


def test_vllm_starts_armed_with_its_window_and_sglang_through_its_environment(tmp_path):
    args, env = profiler.launch_additions("vllm", tmp_path / "s", profiler.Settings(2, 16, 64))
    config = json.loads(args["--profiler-config"])
    assert config == {"profiler": "torch", "torch_profiler_dir": str(tmp_path / "s"),
                      "torch_profiler_with_stack": False, "ignore_frontend": True,
                      "torch_profiler_dump_cuda_time_total": False,
                      "delay_iterations": 2, "max_iterations": 16}
    assert env == {}
    args, env = profiler.launch_additions("sglang", tmp_path / "s", CFG)
    assert args == {} and env == {"SGLANG_TORCH_PROFILER_DIR": str(tmp_path / "s")}
    body = profiler.start_body("sglang", tmp_path / "s", profiler.Settings(2, 16, 64))
    assert body["num_steps"] == 16 and body["start_step"] == 2 and body["output_dir"].endswith("/s")
    assert profiler.start_body("vllm", tmp_path / "s", CFG) is None


def test_a_local_engine_is_told_its_scratch_folder_from_the_project_root(tmp_path):
    scratch = (tmp_path / "data" / "runs" / "r" / "profile" / ".engine").resolve()
    assert profiler.engine_path(scratch, tmp_path, "local") == Path("data/runs/r/profile/.engine")
    assert profiler.engine_path(scratch, tmp_path, "docker") == scratch
    elsewhere = Path("/srv/runs/r/profile/.engine")
    assert profiler.engine_path(elsewhere, tmp_path, "local") == elsewhere


def test_containers_mount_the_scratch_folder_writable(tmp_path):
    scratch = tmp_path / "run" / "profile" / ".engine"
    docker = DockerExecutor(root=tmp_path, image="img", docker={"mounts": ["/models"]})
    argv = docker.launch(run_id="r", engine="vllm", model_path="/models/m", args={}, env={}, port=8000,
                         writable=(scratch,)).argv
    assert argv[argv.index(f"{scratch}:{scratch}") - 1] == "-v"
    assert "/models:/models:ro" in argv
    step = ContainerStepExecutor(root=tmp_path, image="img", docker={"mounts": ["/models"]})
    argv = step.launch(run_id="r", engine="vllm", model_path="/models/m", args={}, env={}, port=8000,
                       writable=(scratch,)).argv
    assert f"--container-mounts=/models:/models:ro,{scratch}:{scratch}" in argv


def engine_writes(scratch: Path, files: dict[str, bytes]):
    """An engine stand-in's /start_profile and /stop_profile: stop writes `files` into `scratch`."""
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append((request.url.path, request.content))
        if request.url.path == "/stop_profile":
            for name, data in files.items():
                (scratch / name).write_bytes(data)
        return httpx.Response(200)
    return calls, httpx.Client(transport=httpx.MockTransport(handler))


def test_a_profiled_point_keeps_each_workers_trace_named_after_it(tmp_path, monkeypatch):
    monkeypatch.setattr(profiler, "SETTLE_S", 0.01)
    folder = tmp_path / "run"
    scratch = profiler.scratch(folder)
    scratch.mkdir(parents=True)
    trace = (FIXTURES / "cpu_tiny_llama.pt.trace.json.gz").read_bytes()
    calls, client = engine_writes(scratch, {"rank0.1.pt.trace.json.gz": trace,
                                            "rank1.1.pt.trace.json.gz": trace,
                                            "rank0.profiler_out.txt": b"Name Self CPU %\n"})
    notes, ran = [], []
    with profiler.profiling(client, "http://e", "vllm", folder, "chat__c04", CFG,
                            lambda k, v: notes.append((k, v))):
        ran.append(True)
    assert [c[0] for c in calls] == ["/start_profile", "/stop_profile"] and ran
    kept = sorted(p.name for p in (folder / "profile").iterdir() if p.is_file())
    assert kept == ["chat__c04.rank0.1.pt.trace.json.gz", "chat__c04.rank0.profiler_out.txt",
                    "chat__c04.rank1.1.pt.trace.json.gz"]
    assert notes == [("profile", "chat__c04 profile/chat__c04.rank0.1.pt.trace.json.gz "
                                 "profile/chat__c04.rank0.profiler_out.txt "
                                 "profile/chat__c04.rank1.1.pt.trace.json.gz")]
    assert list(scratch.iterdir()) == []
    # what ingest reads: each kept file is a trace of the point, the fixture's split unchanged
    for name in (k for k in kept if not k.endswith(".txt")):
        assert profile_trace.is_trace_file(name)
        split = profile_trace.read_profile_trace(folder / "profile", name)
        assert not split.errors and round(sum(split.share(k) for k in profile_trace.KINDS), 6) == 100
    profiler.tidy(scratch)
    assert not scratch.exists() and (folder / "profile").is_dir()


def test_an_sglang_trace_is_renamed_and_an_oversized_or_stray_file_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(profiler, "SETTLE_S", 0.01)
    folder = tmp_path / "run"
    scratch = profiler.scratch(folder)
    scratch.mkdir(parents=True)
    big = b"x" * (1024 * 1024 + 1)
    calls, client = engine_writes(scratch, {"1764-TP-0.trace.json.gz": b"gz", "huge.pt.trace.json.gz": big,
                                            "notes.txt": b"hi"})
    notes = []
    with profiler.profiling(client, "http://e", "sglang", folder, "long__c16",
                            profiler.Settings(0, 8, 1), lambda k, v: notes.append((k, v))):
        pass
    assert json.loads(calls[0][1])["num_steps"] == 8
    assert sorted(p.name for p in (folder / "profile").iterdir() if p.is_file()) == [
        "long__c16.1764-TP-0.pt.trace.json.gz"]
    errors = [v for k, v in notes if k == "profile_error"]
    assert errors == ["long__c16 huge.pt.trace.json.gz: 1048577 bytes, over max_trace_mb 1; not kept",
                      "long__c16 not a trace file: notes.txt"]
    assert list(scratch.iterdir()) == []


def test_a_profiler_that_will_not_start_leaves_the_point_measured_and_says_so(tmp_path):
    folder = tmp_path / "run"
    calls = []

    def handler(request):
        calls.append(request.url.path)
        return httpx.Response(404, text='{"detail":"Not Found"}')
    notes, ran = [], []
    with profiler.profiling(httpx.Client(transport=httpx.MockTransport(handler)), "http://e", "vllm",
                            folder, "chat__c04", CFG, lambda k, v: notes.append((k, v))):
        ran.append(True)
    assert ran and calls == ["/start_profile"]          # no stop for a profiler never started
    assert notes == [("profile_error", 'chat__c04 start_profile: HTTP 404 {"detail":"Not Found"}')]
    profiler.tidy(profiler.scratch(folder))
    assert not (folder / "profile").exists()

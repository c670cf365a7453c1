"""What meta.json would have said, read from a run folder that has none (stages/ingest/infer.py):
the GPUs from docker's device list, NVIDIA_/CUDA_VISIBLE_DEVICES or the engine's parallel sizes
(checked against the workers its log names), the image, the engine version and the maximum
context, each with the line it came from; and the raw_runs row ingest makes of them with the
profile and spec of an import.json.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from helpers.shared_folder import REAL_LOGS
from stages.ingest.infer import infer_run
from stages.formats import lines
from stages.ingest.parsers.cmd import parse_cmd
from stages.formats.vllm_log import parse_vllm_log

FIXTURES = Path(__file__).parent / "fixtures"
NODE_RUNS = FIXTURES / "node_campaign" / "runs"
GLM = "glm53__tp8_dcp8__1024k__vllm__1116-062500"


def inferred(cmd_text: str | None, log_facts: list[lines.Fact] | None = None) -> dict[str, tuple]:
    command = parse_cmd(cmd_text)[0] if cmd_text else None
    got = infer_run(command, "run/cmd.sh" if command else None, log_facts or [], "run/server.log")
    assert len({v.field for v in got}) == len(got)          # one value a field
    return {v.field: (v.value, v.how, v.source_file, v.source_line) for v in got}


def log_facts(path: Path) -> list[lines.Fact]:
    with path.open("rb") as fh:
        return parse_vllm_log(lines.read_chunks(fh)).facts


def test_docker_device_list_gives_the_gpu_set_image_and_context():
    got = inferred(
        "#!/bin/sh\n# a comment\n"
        "docker run --rm --gpus '\"device=4,5,6,7\"' --ipc host -e HF_HOME=/cache "
        "vllm/vllm-openai:v0.31.0 serve /models/x --tensor-parallel-size 4 --max-model-len 262144\n")
    assert got["gpus"] == ("4,5,6,7", 'the device list of `docker run --gpus "device=4,5,6,7"` in cmd.sh',
                           "run/cmd.sh", 3)
    assert got["gpu_count"][0] == "4"
    assert got["image"][:1] == ("vllm/vllm-openai:v0.31.0",) and got["image"][3] == 3
    assert got["max_model_len"][:2] == ("262144", "--max-model-len on the engine command in cmd.sh")


def test_gpus_all_falls_back_to_the_parallel_sizes_and_names_the_workers():
    facts = log_facts(NODE_RUNS / GLM / "server.log")
    got = inferred("docker run --gpus all vllm/vllm-openai:v0.31.0 serve /m "
                   "--tensor-parallel-size 8 --decode-context-parallel-size 8\n", facts)
    assert "gpus" not in got                       # `all` names no set
    value, how, source, line = got["gpu_count"]
    assert value == "8" and source == "run/cmd.sh" and line == 1
    assert how == ("tensor parallel 8 on the engine command in cmd.sh; the log names 8 GPU workers "
                   "(Worker_TP0_DCP0 to Worker_TP7_DCP7)")


def test_visible_devices_from_an_export_line_name_that_line():
    got = inferred("export CUDA_VISIBLE_DEVICES=0,1\n"
                   "python -m vllm.entrypoints.openai.api_server --model m -tp 2\n")
    assert got["gpus"] == ("0,1", "CUDA_VISIBLE_DEVICES=0,1 in cmd.sh", "run/cmd.sh", 1)
    assert got["gpu_count"][0] == "2"
    assert "image" not in got


@pytest.mark.parametrize("cmd, count, said", [
    ("vllm serve m --tensor-parallel-size 4 --data-parallel-size 2", "8",
     "tensor parallel 4 x data parallel 2"),
    ("vllm serve m -tp 2 -pp 2", "4", "tensor parallel 2 x pipeline parallel 2"),
    ("python -m sglang.launch_server --model-path m --tp 8 --dp 8 --enable-dp-attention", "8",
     "tensor parallel 8 x data parallel 8 (data parallel attention inside the tensor group)"),
    ("python -m sglang.launch_server --model-path m --tp 4 --dp 2", "8",
     "tensor parallel 4 x data parallel 2"),
])
def test_parallel_sizes_count_the_gpus_as_each_engine_does(cmd, count, said):
    value, how, _, _ = inferred(cmd + "\n")["gpu_count"]
    assert (value, how) == (count, f"{said} on the engine command in cmd.sh")


def test_no_size_on_the_command_line_is_not_a_guess():
    assert "gpu_count" not in inferred("vllm serve m --max-model-len 4096\n")


@pytest.mark.shared
def test_a_published_tp8_log_alone_names_its_eight_workers_and_version():
    facts = log_facts(REAL_LOGS / "vllm_08_v010_tp8_vllmworker_rank_8kvlines.log")
    got = inferred(None, facts)
    value, how, source, line = got["gpu_count"]
    assert value == "8" and source == "run/server.log"
    assert how == "the GPU workers the engine's log names (VllmWorker rank=0 to VllmWorker rank=7)"
    version = next(f for f in facts if f.fact == "engine_version")
    assert got["engine_version"] == (version.value_text, "the version line of the engine's log",
                                     "run/server.log", version.line)


def _ingest(root: Path, folder: Path, record: dict | None) -> duckdb.DuckDBPyConnection:
    from stages.ingest.stage import run as ingest_run
    runs = root / "data" / "runs"
    dest = runs / folder.name
    shutil.copytree(folder, dest, ignore=shutil.ignore_patterns("meta.json", "MANIFEST.sha256"))
    if record is not None:
        (dest / "import.json").write_text(json.dumps(record))
    ingest_run(runs_dir=runs, warehouse=root / "data" / "warehouse.duckdb", root=root)
    return duckdb.connect(str(root / "data" / "warehouse.duckdb"), read_only=True)


def test_ingest_reads_import_json_and_keeps_each_inferred_line(tmp_path):
    record = {"record": "import", "schema_version": 1, "run_id": GLM, "profile": "h200x8",
              "spec": None, "source": "/elsewhere/runs/" + GLM, "imported_at": "2026-12-02T10:00:00Z",
              "imported_by": "someone", "files": {}}
    con = _ingest(tmp_path, NODE_RUNS / GLM, record)
    row = con.execute("select profile, spec, gpus, gpu_count, image, engine_version, recovered, "
                      "imported_from, imported_by, source_file, source_line from raw_runs").fetchall()
    assert row == [("h200x8", None, "0,1,2,3,4,5,6,7", 8, "vllm/vllm-openai:v0.31.0", "0.31.0", True,
                    "/elsewhere/runs/" + GLM, "someone", f"data/runs/{GLM}/import.json", 1)]
    fields = dict(con.execute("select field, source_file || ':' || source_line from raw_run_inferred").fetchall())
    assert fields == {"gpus": f"data/runs/{GLM}/cmd.sh:3", "gpu_count": f"data/runs/{GLM}/cmd.sh:3",
                      "image": f"data/runs/{GLM}/cmd.sh:3", "max_model_len": f"data/runs/{GLM}/cmd.sh:3",
                      "engine_version": f"data/runs/{GLM}/server.log:1"}


def test_an_import_record_of_another_kind_is_an_error_row_not_a_profile(tmp_path):
    con = _ingest(tmp_path, NODE_RUNS / GLM, {"record": "something else", "profile": "h200x8"})
    assert con.execute("select profile, recovered from raw_runs").fetchall() == [(None, True)]
    reasons = [r[0] for r in con.execute("select reason from ingest_errors").fetchall()]
    assert any("import.json: not an import record" in r for r in reasons), reasons

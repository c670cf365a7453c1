"""campaign trace: finding facts, the chain, and recomputing from raw files."""
from __future__ import annotations

import json

import pytest

from stages.core.config import CampaignError, Paths, load_params
from stages.render.trace import chain, find, find_by_value

FACTS = [
    {"id": "launch_ready_s--r1", "name": "launch_ready_s", "params": {"run_id": "r1"},
     "value": 627.5, "unit": "s", "display": "627.5", "sql": "select 1 from launches",
     "run_ids": ["r1"], "source_file": "data/runs/r1/launch.out", "source_line": 2,
     "excerpt": "ready_s=627.5", "stage": "derive", "git_sha": "abc", "pages": ["p.md"]},
    {"id": "launch_kv_tokens--r1", "name": "launch_kv_tokens", "params": {"run_id": "r1"},
     "value": 1573325, "unit": "tokens", "display": "1,573,325", "sql": "select 1",
     "run_ids": ["r1"], "source_file": None, "source_line": None, "excerpt": None,
     "stage": "derive", "git_sha": None, "pages": []},
    {"id": "launch_kv_tokens--r2", "name": "launch_kv_tokens", "params": {"run_id": "r2"},
     "value": 16384, "unit": "tokens", "display": "16,384", "sql": "select 1",
     "run_ids": ["r2"], "source_file": None, "source_line": None, "excerpt": None,
     "stage": "derive", "git_sha": None, "pages": []},
]


def test_find_by_id_or_unique_name():
    assert find(FACTS, "launch_ready_s")["id"] == "launch_ready_s--r1"
    assert find(FACTS, "launch_kv_tokens--r2")["value"] == 16384
    with pytest.raises(CampaignError, match="names 2 facts"):
        find(FACTS, "launch_kv_tokens")
    with pytest.raises(CampaignError, match="unknown fact"):
        find(FACTS, "nope")


@pytest.mark.parametrize("shown, ids", [
    ("627.5", ["launch_ready_s--r1"]),
    ("1,573,325", ["launch_kv_tokens--r1"]),
    ("1573325", ["launch_kv_tokens--r1"]),
    ("3.7", []),
])
def test_find_by_value(shown, ids):
    assert [f["id"] for f in find_by_value(FACTS, shown)] == ids


def test_chain_reads_the_raw_line_now_and_names_command_and_stage(tmp_path):
    root = tmp_path
    (root / "params.yaml").write_text((__import__("pathlib").Path(__file__).parent.parent
                                       / "params.yaml").read_text())
    paths = Paths.from_params(load_params(root), root)
    run = paths.runs / "r1"
    run.mkdir(parents=True)
    (run / "launch.out").write_text("status=ready\nready_s=627.5\n")
    (run / "cmd.sh").write_text("#!/bin/sh\n# header\nvllm serve /m --max-num-seqs 8\n")
    (run / "meta.json").write_text(json.dumps({"image": "vllm/vllm-openai:v0.31.0",
                                               "image_digest": "sha256:0f", "engine": "vllm"}))
    text = chain(FACTS[0], paths)
    assert "raw       data/runs/r1/launch.out:2" in text
    assert "excerpt   ready_s=627.5" in text
    assert "cmd.sh    vllm serve /m --max-num-seqs 8" in text
    assert "vllm/vllm-openai:v0.31.0  digest sha256:0f" in text
    assert "re-run: dvc repro derive" in text and "warning" not in text
    (run / "launch.out").write_text("status=ready\nready_s=1.0\n")
    assert "warning   the line differs" in chain(FACTS[0], paths)


def test_a_source_outside_the_project_is_refused(tmp_path):
    from stages.render.errors import FactError
    from stages.render.evidence import read_line

    (tmp_path / "inside.txt").write_text("a\nb\n")
    assert read_line(tmp_path, "inside.txt", 2) == "b"
    assert read_line(tmp_path, "../../etc/passwd", 1) == "(not shown: refused (outside the raw folders))"
    (tmp_path / "sub").mkdir()
    assert read_line(tmp_path, "inside.txt", 1, within=(tmp_path / "sub",)) \
        == "(not shown: refused (outside the raw folders))"
    with pytest.raises(FactError, match="has no line"):
        read_line(tmp_path, "inside.txt", 9)


def test_a_compressed_source_is_read_decompressed(tmp_path):
    import gzip

    from stages.render.evidence import read_line

    (tmp_path / "server.log.gz").write_bytes(gzip.compress(b"one\ntwo HF_TOKEN=hf_abcdefghijklmnopqrstuv\n"))
    assert read_line(tmp_path, "server.log.gz", 2) == "two HF_TOKEN=***"

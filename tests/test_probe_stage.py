"""The node probe as a DVC stage: `probe@<kind>` for each node kind of params `probe_nodes` (none
on local-cpu), running the probe command into a new write-once folder under paths.nodes and
appending it to a ledger DVC keeps between runs."""
from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from stages.probe import node_probe

ROOT = Path(__file__).resolve().parent.parent
DVC = Path(sys.executable).parent / "dvc"
# the probe's own CPU path (gloo, two ranks): no GPU here, as in tests/test_probe.py
CPU = ["--device", "cpu", "--backend", "gloo", "--world-size", "2", "--sizes", "1KiB..4KiB",
       "--iters", "1", "--warmup", "0"]


def stage() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["probe"]


def params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def test_the_stage_runs_the_probe_per_node_kind_with_a_persisted_ledger():
    s = stage()
    assert s["foreach"] == "${probe_nodes}"
    do = s["do"]
    argv = shlex.split(do["cmd"])
    assert argv[:3] == ["${probe.python}", "-m", "stages.probe.node_probe"]
    assert argv[argv.index("--node-kind") + 1] == "${item}" and argv[argv.index("--profile") + 1] == "${profile}"
    ledger = argv[argv.index("--ledger") + 1]
    [out] = do["outs"]
    assert list(out) == [ledger] and ledger == "${paths.ledger}/probe__${item}.jsonl"
    assert out[ledger] == {"cache": False, "persist": True}      # DVC neither deletes nor caches it
    assert set(do["params"]) == {"probe", "profiles.${profile}.env"}
    assert "${paths.nodes}" not in json.dumps(do)    # the committed node folders are no output of it


def test_local_cpu_probes_nothing_and_ingest_follows_the_ledger():
    p = params()
    assert p["profile"] == "local-cpu" and p["probe_nodes"] == []
    assert p["probe"]["groups"] == "auto" and p["probe"]["python"] == "python"
    ingest = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["ingest"]
    assert {"${paths.ledger}", "${paths.nodes}"} <= set(ingest["deps"])


def _dvc_stages(tmp: Path, probe_nodes: list[str]) -> list[str]:
    shutil.copy(ROOT / "dvc.yaml", tmp / "dvc.yaml")
    p = params()
    p["probe_nodes"] = probe_nodes
    (tmp / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    if not (tmp / ".dvc").exists():
        subprocess.run([str(DVC), "init", "--no-scm", "-q"], cwd=tmp, check=True)
    listed = subprocess.run([str(DVC), "stage", "list", "--name-only"], cwd=tmp, check=True,
                            capture_output=True, text=True).stdout.split()
    return [name for name in listed if name.startswith("probe")]


def test_dvc_lists_a_probe_only_for_the_node_kinds_given(tmp_path):
    assert _dvc_stages(tmp_path, []) == []
    assert _dvc_stages(tmp_path, ["h200x8"]) == ["probe@h200x8"]


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mode)
            for p in sorted(folder.iterdir())}


@pytest.fixture()
def project(tmp_path) -> Path:
    """A project root with params.yaml and one committed node folder, read-only as the probe
    leaves them."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    old = tmp_path / "data" / "nodes" / "h200x8__1130-054711"
    old.mkdir(parents=True)
    (old / "meta.json").write_text(json.dumps({"node_id": old.name, "status": "complete"}) + "\n")
    (old / "gpus.csv").write_bytes((ROOT / "tests" / "fixtures" / "node" / "gpus_h200x8.csv").read_bytes())
    for p in old.iterdir():
        p.chmod(0o444)
    return tmp_path


def test_the_stage_command_adds_a_folder_and_a_ledger_line_and_leaves_the_others(project):
    argv = shlex.split(stage()["do"]["cmd"].replace("${item}", "cpu").replace("${profile}", "local-cpu")
                       .replace("${paths.ledger}", params()["paths"]["ledger"]))[3:]
    old = project / "data" / "nodes" / "h200x8__1130-054711"
    before = _snapshot(old)
    ledger = project / "data" / "ledger" / "probe__cpu.jsonl"
    assert node_probe.main(argv + CPU + ["--root", str(project)]) == 0
    time.sleep(1.1)                     # node ids are to the second
    assert node_probe.main(argv + CPU + ["--root", str(project)]) == 0
    folders = sorted(p.name for p in (project / "data" / "nodes").iterdir())
    assert len(folders) == 3 and folders[-1] > folders[-2] > "cpu__" and old.name in folders
    assert _snapshot(old) == before
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [e["node_id"] for e in entries] == folders[:2]
    assert [e["folder"] for e in entries] == [f"data/nodes/{name}" for name in folders[:2]]
    assert all(e["status"] == "complete" and e["started_at"] <= e["finished_at"] for e in entries)
    for name in folders[:2]:
        meta = json.loads((project / "data" / "nodes" / name / "meta.json").read_text())
        assert meta["node_kind"] == "cpu" and (project / "data" / "nodes" / name / "allreduce.jsonl").is_file()


def test_a_failed_probe_adds_no_ledger_line(project, capsys):
    argv = ["--node-kind", "h200x8", "--ledger", "data/ledger/probe__h200x8.jsonl", "--root", str(project),
            "--device", "cuda"]
    assert node_probe.main(argv) == 2       # torch sees no GPU on the test machine
    assert "sees no GPU" in capsys.readouterr().err
    assert not (project / "data" / "ledger" / "probe__h200x8.jsonl").exists()

"""The node campaign at scale: valid, unique run ids, the same bytes each time, one Part per group."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from stages.core.config import load_params
from stages.core.names import SAFE_NAME
from stages.tools.synth import synth_node_scale
from stages.tools.synth.synth_node_plan import SCENARIO

PROJECT = Path(__file__).resolve().parent.parent


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_scaled_root_has_valid_run_ids_and_is_deterministic(tmp_path):
    runs = len(SCENARIO) + 3                # a whole group and part of the next
    made = synth_node_scale.write(out_root=tmp_path / "a", runs=runs, root=PROJECT)
    again = synth_node_scale.write(out_root=tmp_path / "b", runs=runs, root=PROJECT)
    assert made["runs"] == runs and made["groups"] == 2
    assert made["run_ids"] == again["run_ids"]
    assert files(tmp_path / "a") == files(tmp_path / "b")
    assert len(set(made["run_ids"])) == runs
    folders = sorted(p.name for p in (tmp_path / "a" / "data" / "runs").iterdir())
    assert folders == sorted(made["run_ids"])
    for run_id in made["run_ids"]:
        fields = run_id.split("__")
        assert len(fields) == 5 and all(SAFE_NAME.match(f) for f in fields), run_id
        meta = json.loads((tmp_path / "a" / "data" / "runs" / run_id / "meta.json").read_text())
        assert meta["run_id"] == run_id and fields[0] == meta["model"]
    params = load_params(tmp_path / "a")      # the written params pass the config checks
    assert params["profile"] == "h200x8"
    series = yaml.safe_load((tmp_path / "a" / "site" / "series.yaml").read_text())
    models = [m for part in series["parts"] for m in part["runs"]["models"]]
    assert len(models) == len(set(models))
    assert {r.split("__")[0] for r in made["run_ids"]} <= set(models)
    assert [p["title"] for p in series["parts"]] == ["Group A", "Group B"]


def test_group_labels_print_no_digits():
    assert [synth_node_scale.group_label(g) for g in (0, 25, 26, 124)] == ["A", "Z", "AA", "DU"]

"""The scripted node campaign at scale: a project root whose runs are the synth_node scenario
repeated under new model and spec names, for the render benchmark.

Group g (0, 1, ...) is the scenario's attempts with each spec renamed `<spec>-gNNN` and each model
`<model>-gNNN`, started g days later, with their own seeds; the first `runs` attempts in group order
are written. The root holds what render reads: params.yaml (the node profile active, the renamed
specs and their arms, no compare pairs), site/ with one Part per group (its own template, covering
the group's models), mkdocs.yml, and the run folders under data/runs. Same arguments, same bytes.

Example:
    from stages.tools.synth import synth_node_scale
    synth_node_scale.write(out_root=Path("data/bench/render/root-30"), runs=30)
"""
from __future__ import annotations

import copy
import shutil
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import yaml

from stages.core.config import CampaignError, load_params
from stages.tools.synth.synth_node import PROFILE, RunWriter
from stages.tools.synth.synth_node_plan import SCENARIO, Attempt

SCALE_VERSION = 1
PART_TEMPLATE = """{% from "sections/model.md.j2" import model_section with context %}
# {{ page.title }}

{{ byline() }}

{{ nav() }}

One group of the scaled node campaign: each model below is a renamed copy of a scenario model.

{% for m in page.models %}
{{ model_section(m) }}
{% endfor %}
{{ nav() }}
"""


def group_name(name: str, group: int) -> str:
    return f"{name}-g{group:03d}"


def group_label(group: int) -> str:
    """A group's label in letters (A, B, ..., Z, AA, ...): a Part's title prints no digits."""
    label = ""
    group += 1
    while group:
        group, rest = divmod(group - 1, 26)
        label = chr(ord("A") + rest) + label
    return label


def plan(runs: int) -> list[tuple[int, Attempt]]:
    """The first `runs` attempts of the repeated scenario, as (group, attempt), in group order."""
    if runs < 1:
        raise CampaignError(f"synth-node-scale: runs must be at least 1, not {runs}")
    out: list[tuple[int, Attempt]] = []
    group = 0
    while len(out) < runs:
        for a in SCENARIO:
            if len(out) == runs:
                break
            out.append((group, replace(a, spec=group_name(a.spec, group),
                                       started=a.started + timedelta(days=group),
                                       seed=a.seed + 1000 * group)))
        group += 1
    return out


def scaled_params(params: dict[str, Any], groups: int) -> dict[str, Any]:
    """params with the node profile active, every scenario spec and arm renamed per group."""
    out = copy.deepcopy(params)
    names = sorted({a.spec for a in SCENARIO})
    specs, arms = {}, {}
    for g in range(groups):
        for name in names:
            spec = dict(params["specs"][name])
            spec["model"] = group_name(spec["model"], g)
            specs[group_name(name, g)] = spec
            for key, value in (params.get("arms") or {}).get(name, {}).items():
                arms.setdefault(group_name(name, g), {})[key] = group_name(value, g)
    out.update(profile=PROFILE, run_specs=[], specs=specs, arms=arms, compare=[], run_sets={})
    return out


def series(params: dict[str, Any], groups: int, authors: dict[str, Any]) -> dict[str, Any]:
    """One Part per group, covering the group's models."""
    parts = []
    for g in range(groups):
        models = sorted({s["model"] for n, s in params["specs"].items() if n.endswith(f"-g{g:03d}")})
        parts.append({"part": g + 1, "title": f"Group {group_label(g)}", "date": date(2026, 12, 1),
                      "authors": list(authors), "description": "A group of the scaled node campaign.",
                      "categories": ["scale"], "template": f"scale-g{g:03d}.md.j2",
                      "runs": {"profile": PROFILE, "models": models}})
    return {"authors": authors, "parts": parts}


def write(*, out_root: Path, runs: int, root: Path = Path(".")) -> dict[str, Any]:
    """Write the scaled project root under `out_root` (which must not exist yet); returns
    {runs, groups, run_ids, parts}."""
    root, out_root = Path(root), Path(out_root)
    if out_root.exists():
        raise CampaignError(f"{out_root} already exists; synth-node-scale writes a new folder")
    params = load_params(root)
    attempts = plan(runs)
    groups = attempts[-1][0] + 1
    scaled = scaled_params(params, groups)
    shutil.copytree(root / "site", out_root / "site")
    shutil.copyfile(root / "mkdocs.yml", out_root / "mkdocs.yml")
    (out_root / "params.yaml").write_text(yaml.safe_dump(scaled, sort_keys=False))
    own = yaml.safe_load((root / "site" / "series.yaml").read_text())
    book = series(scaled, groups, own.get("authors") or {})
    (out_root / "site" / "series.yaml").write_text(yaml.safe_dump(book, sort_keys=False))
    for part in book["parts"]:
        (out_root / "site" / "templates" / part["template"]).write_text(PART_TEMPLATE)
    runs_dir = out_root / "data" / "runs"
    runs_dir.mkdir(parents=True)
    run_ids = [RunWriter(a, scaled, runs_dir).write() for _, a in attempts]
    return {"runs": len(run_ids), "groups": groups, "run_ids": run_ids,
            "parts": [p["template"] for p in book["parts"]], "version": SCALE_VERSION}

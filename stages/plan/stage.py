"""The plan stage (`campaign plan`): before the node is booked, will each spec fit, how long will it
take, and what will it cost (stages/planning/plans.py); printed per spec, run set and Part
(report.py). With --write (the dvc stage), the run_specs' plans go to paths.plan/specs.json, where
the scheduler takes the minutes of a spec that gives no est_minutes.

Every launch the campaign holds beside its plan is derive's table launch_plans (the same
arithmetic, stages/planning/).
"""
from __future__ import annotations

import json
from pathlib import Path

from stages.core.files import write_atomic
from stages.planning import history, plans



def run(params: dict, *, names: list[str], models_dir: Path, campaign_db: Path,
        out_dir: Path | None = None) -> list[dict]:
    """Plan `names` with the history the campaign database holds; write them under `out_dir`."""
    specs = plans.plan_specs(params, names, history.read(campaign_db), models_dir)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(out_dir / plans.SPECS_FILE, json.dumps(specs, indent=1, sort_keys=True) + "\n")
    return specs

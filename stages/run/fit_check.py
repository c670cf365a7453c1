"""The scheduler's look before it launches: a spec that the memory arithmetic says cannot fit on a
GPU profile is refused with one line, before any engine starts (a spec saying `force: true` is
launched anyway), and a spec without `est_minutes` takes its time from the plan.

The arithmetic is stages/planning/'s, with the profile's reserve (the plan stage, which reads
the campaign's earlier launches, prints the same with their reserve: `campaign plan`). Where the
plan stage has written its plans (paths.plan/specs.json), a spec's time is its plan's; else the
time from the profile's rates alone.
"""
from __future__ import annotations

import json
from pathlib import Path

from stages.core.config import CampaignError, profile as get_profile
from stages.planning import inputs as plan_inputs
from stages.planning.plans import SPECS_FILE


def _spec_plan(params: dict, name: str, models_dir: Path) -> plan_inputs.SpecPlan:
    return plan_inputs.spec_plan(params, models_dir=models_dir, **plan_inputs.spec_fields(params, name))


def verdicts(params: dict, names: list[str], models_dir: Path) -> dict[str, tuple[str, str]]:
    """Each spec's (verdict, why); `not planned` where its model's config or its profile's
    planning settings are missing here."""
    out = {}
    for name in names:
        try:
            cap = _spec_plan(params, name, models_dir).capacity
            out[name] = (cap.verdict, cap.why)
        except CampaignError as exc:
            out[name] = ("not planned", str(exc))
    return out


def refuse_unfit(params: dict, names: list[str], models_dir: Path, progress=lambda s: None) -> None:
    """Raise one line a spec for each spec of a GPU profile the plan says cannot fit (unless it
    says force: true); say which could not be planned."""
    refused = []
    for name, (verdict, why) in verdicts(params, names, models_dir).items():
        spec = params["specs"][name]
        if not get_profile(params, spec.get("profile")).get("gpus_per_node"):
            continue
        if verdict == "does not fit" and not spec.get("force"):
            refused.append(f"{name} does not fit: {why} (force: true in the spec launches it anyway)")
        elif verdict == "does not fit":
            progress(f"schedule: {name} does not fit by the plan ({why}); launched: it says force: true")
        elif verdict == "not planned":
            progress(f"schedule: {name} not planned ({why}); launched without the check")
    if refused:
        raise CampaignError("\n".join(refused))


def minutes(params: dict, names: list[str], models_dir: Path, plan_dir: Path | None) -> dict[str, float]:
    """Minutes of each spec without est_minutes: its plan's (the plan stage's file), else from the
    profile's rates; specs that cannot be planned are left out (the scheduler's default applies)."""
    written = {}
    if plan_dir is not None and (plan_dir / SPECS_FILE).is_file():
        try:
            written = {p["spec"]: p.get("run_s") for p in json.loads((plan_dir / SPECS_FILE).read_text())}
        except (ValueError, TypeError, KeyError):
            written = {}
    out = {}
    for name in names:
        spec = params["specs"][name]
        if "est_minutes" in spec:
            continue
        if written.get(name):
            out[name] = float(written[name]) / 60
            continue
        try:
            sp = _spec_plan(params, name, models_dir)
        except CampaignError:
            continue
        fields = plan_inputs.spec_fields(params, name)
        est = plan_inputs.estimate(params, name, sp, fields["workloads"], fields["workload_names"])
        out[name] = est.total_s / 60
    return out

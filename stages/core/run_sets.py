"""Run sets: named selections of a campaign's runs (params.yaml `run_sets`), which a Part of the
series covers, a comparison takes a side of, and `campaign plan` totals. A run set is a mapping
with any of `profile`, `specs`, `models` and `image` (a full image name or a bare tag); a run, or a
spec, belongs to it when it matches every key given. Render selects runs by it
(stages/render/run_sets.py), the plan stage specs (stages/plan/report.py).
"""
from __future__ import annotations

from typing import Any

from stages.core.config import CampaignError


KEYS = ("profile", "specs", "models", "image")


def definition(ref: Any, run_sets: dict[str, Any] | None, origin: str) -> dict[str, Any]:
    """The run set `ref` names (a key of `run_sets`) or spells out (a mapping), checked."""
    run_sets = run_sets or {}
    if isinstance(ref, str):
        if ref not in run_sets:
            known = ", ".join(sorted(run_sets)) or "none"
            raise CampaignError(f"{origin}: unknown run set {ref!r} (params.yaml run_sets: {known})")
        ref = run_sets[ref]
    if not isinstance(ref, dict) or not ref:
        raise CampaignError(f"{origin}: a run set is a run_sets name or a mapping of {', '.join(KEYS)}")
    unknown = sorted(set(ref) - set(KEYS))
    if unknown:
        raise CampaignError(f"{origin}: run set key(s) {', '.join(unknown)} not among {', '.join(KEYS)}")
    for key in ("specs", "models"):
        if not isinstance(ref.get(key, []), list):
            raise CampaignError(f"{origin}: run set {key} must be a list")
    return dict(ref)

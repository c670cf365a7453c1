"""Run sets: the runs a Part of the series covers, or a side of a comparison.

A run set is a mapping with any of `profile`, `specs`, `models` and `image` (a full image name or
a bare tag); a run belongs to it when it matches every key given. params.yaml names run sets under
`run_sets`; a Part (site/series.yaml) names one or gives the mapping inline.
"""
from __future__ import annotations

from typing import Any

import duckdb

from stages.core.config import CampaignError
from stages.render.queries import ROWS_SQL, load_query

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


def select(con: duckdb.DuckDBPyConnection, run_set: dict[str, Any], *,
           current_only: bool = False) -> list[str]:
    """The run ids of `run_set`, oldest first (only each spec's reported attempt if current_only)."""
    sql = load_query(ROWS_SQL, "run_set", "row query")
    params = {
        "profile": run_set.get("profile"),
        "specs": [str(s) for s in run_set.get("specs") or []],
        "models": [str(m) for m in run_set.get("models") or []],
        "image": run_set.get("image"),
        "current_only": current_only,
    }
    return [r[0] for r in con.execute(sql, params).fetchall()]

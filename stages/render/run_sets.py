"""The runs of a run set (stages/core/run_sets.py says what one is): the runs a Part of the series
covers, or a side of a comparison."""
from __future__ import annotations

from typing import Any

import duckdb

from stages.render.queries import ROWS_SQL, load_query


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

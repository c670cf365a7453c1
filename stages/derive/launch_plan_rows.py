"""The plans of the campaign's launches, for the mart launch_plans: each launch planned from its own
flags and steps with the history of the others (stages/planning/plans.py), written as the table
launch_plan_rows just before launch_plans is built (it reads the models the plans read: runs,
launches, run_phases, run_timeline and stg_command_flags). Without params (a caller that passes
none) every launch is `not planned`, and says why."""
from __future__ import annotations

from pathlib import Path

import duckdb

from stages.planning import history, plans

TABLE = "launch_plan_rows"
BEFORE = "launch_plans"          # the mart that reads it


def create(con: duckdb.DuckDBPyConnection, params: dict | None, models_dir: Path | None) -> None:
    cols = plans.LAUNCH_PLAN_COLUMNS
    con.execute(f"create table {TABLE} ({', '.join(f'{c} {t}' for c, t in cols.items())})")
    rows = plans.plan_launches(params or {}, history.from_connection(con), Path(models_dir or "."))
    if rows:
        con.executemany(f"insert into {TABLE} values ({', '.join('?' for _ in cols)})",
                        [[r[c] for c in cols] for r in rows])

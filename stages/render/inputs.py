"""The inputs of a fact computed from many rows (a median, a p90 or p99, a count, a share): each row it was
computed from, where its raw file holds the value, and whether it was used or why it was left
out. Declared in stages/render/sql/inputs/inputs.yaml; each fact's audit entry lists them,
`campaign trace` prints them and `campaign trace --verify` recomputes the value from them.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import duckdb
import yaml

from stages.render.errors import FactError
from stages.render import row_batch
from stages.render.queries import SQL_DIR, load_query, sql_params

INPUTS_SQL = SQL_DIR / "inputs"
DECLARATIONS = "inputs.yaml"
STATISTICS = ("median", "p90", "p99", "per_second", "count", "mean", "sum", "share_pct")


@dataclass(frozen=True)
class Inputs:
    rows: str        # the query in INPUTS_SQL
    figure: str      # its columns <figure>_value, <figure>_path, <figure>_used
    statistic: str   # one of STATISTICS


@lru_cache(maxsize=4)
def declared(directory: Path = INPUTS_SQL) -> dict[str, Inputs]:
    """The facts that list their inputs, by fact name."""
    path = directory / DECLARATIONS
    if not path.is_file():
        return {}
    entries = yaml.safe_load(path.read_text()) or {}
    out = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict) or set(entry) != {"rows", "figure", "statistic"} \
                or entry["statistic"] not in STATISTICS:
            raise FactError(f"{DECLARATIONS}: {name}: needs rows, figure and statistic "
                            f"({', '.join(STATISTICS)})")
        out[str(name)] = Inputs(str(entry["rows"]), str(entry["figure"]), entry["statistic"])
    return out


def input_rows(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any],
               directory: Path = INPUTS_SQL, cache: dict | None = None
               ) -> tuple[str | None, list[dict[str, Any]]]:
    """(statistic, rows) of fact `name` with `params`; (None, []) for a fact without inputs.
    Each row: file, path, value, used, reason. `cache` keeps each inputs query's result by its
    parameters, for the facts that share one (a point's median, p90 and rates)."""
    spec = declared(directory).get(name)
    if spec is None:
        return None, []
    key = _key(directory, spec.rows, params)
    if cache is not None and key in cache:
        columns, data = cache[key]
    else:
        sql = load_query(directory, spec.rows, "inputs query")
        try:
            cur = con.execute(sql, params)
            data = cur.fetchall()
        except duckdb.Error as exc:
            raise FactError(f"inputs of {name!r}: query failed: {exc}".splitlines()[0]) from None
        columns = [d[0] for d in cur.description]
        if cache is not None:
            cache[key] = columns, data
    rows = []
    for values in data:
        row = dict(zip(columns, values))
        rows.append({"file": row["source_file"], "path": row[f"{spec.figure}_path"],
                     "value": row[f"{spec.figure}_value"], "used": bool(row[f"{spec.figure}_used"]),
                     "reason": row.get("reason")})
    return spec.statistic, rows


def _key(directory: Path, rows: str, params: dict[str, Any]) -> tuple:
    return directory, rows, json.dumps(params, sort_keys=True, default=repr)


def prefetch(con: duckdb.DuckDBPyConnection, name: str, sets: list[dict[str, Any]], cache: dict,
             directory: Path = INPUTS_SQL) -> None:
    """The inputs query of fact `name` run once for every parameter set of `sets` not in `cache`
    yet (stages/render/row_batch.py), its rows kept in `cache` as input_rows keeps them. A query
    without a batch form, or a batch that fails, is left to input_rows one set at a time."""
    spec = declared(directory).get(name)
    if spec is None:
        return
    todo = [s for s in sets if _key(directory, spec.rows, s) not in cache]
    sql = load_query(directory, spec.rows, "inputs query")
    names = tuple(sql_params(sql))
    batch = row_batch.batch_sql(sql, names) if len(todo) > 1 and names else None
    if batch is None or any(set(s) != set(names) for s in todo):
        return
    try:
        cur = con.execute(batch, row_batch.batch_params(todo, names))
        data = cur.fetchall()
    except duckdb.Error:
        return
    columns = [d[0] for d in cur.description][1:]
    found = row_batch.rows_by_set(data, len(todo))
    for i, s in enumerate(todo):
        cache[_key(directory, spec.rows, s)] = columns, found[i]


def recompute(statistic: str, rows: list[dict[str, Any]]) -> float | int | None:
    """The value `statistic` gives over the rows used (None when no row has a value)."""
    values = sorted(float(r["value"]) for r in rows if r["used"] and r["value"] is not None)
    if statistic == "count":
        return sum(1 for r in rows if r["used"])
    if not values:
        return None
    if statistic == "share_pct":    # values of 1 (met) and 0 (missed): the percent that met
        return 100.0 * sum(values) / len(values)
    if statistic in ("p90", "p99"):
        position = (0.9 if statistic == "p90" else 0.99) * (len(values) - 1)
        low = math.floor(position)
        high = min(low + 1, len(values) - 1)
        return values[low] + (values[high] - values[low]) * (position - low)
    if statistic == "mean":
        return statistics.fmean(values)
    if statistic == "sum":
        return math.fsum(values)
    median = statistics.median(values)
    if statistic == "per_second":
        return 1000.0 / median if median else None
    return median

"""The settings the setup comparison reads from params.yaml, as derive's parameter tables:
`param_prices` (each price set of `prices`, in dollars per GPU-hour, with the source it cites) and
`param_pareto` (the decode speed per user at which setups are compared along their Pareto
frontiers: `pareto.compare_user_tok_s` for every workload, a row with a null workload, and
`pareto.workloads.<name>` for a workload whose users need another speed). The marts pareto_points,
pareto_compare and point_cost read them.

Example (params.yaml):
    pareto: {compare_user_tok_s: 30, workloads: {doc-1m: 15}}
    prices:
      h200-on-demand: {usd_per_gpu_hour: 4.54, source: S40}
"""
from __future__ import annotations

import re
from typing import Any

import duckdb

from stages.core.config import CampaignError

SOURCE_ID = re.compile(r"S\d+")


def price_rows(prices: dict[str, Any] | None) -> list[tuple[str, float, str]]:
    """(price_set, usd_per_gpu_hour, source) for each price set, checked."""
    rows = []
    for name, entry in (prices or {}).items():
        value = entry.get("usd_per_gpu_hour") if isinstance(entry, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise CampaignError(
                f"params.yaml: prices.{name}.usd_per_gpu_hour must be a positive number, not {value!r}")
        source = entry.get("source")
        if not isinstance(source, str) or not SOURCE_ID.fullmatch(source.strip()):
            raise CampaignError(
                f"params.yaml: prices.{name}.source must be a source id of site/sources.yaml (S<n>)")
        rows.append((str(name), float(value), source.strip()))
    return rows


def _speed(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise CampaignError(f"params.yaml: {where} must be a positive number, not {value!r}")
    return float(value)


def compare_speeds(pareto: dict[str, Any] | None) -> list[tuple[str | None, float | None]]:
    """(workload, speed) rows: the default (workload None; speed None when params sets none), then
    each workload's own, checked."""
    pareto = pareto or {}
    default = pareto.get("compare_user_tok_s")
    rows: list[tuple[str | None, float | None]] = [
        (None, None if default is None else _speed(default, "pareto.compare_user_tok_s"))]
    named = pareto.get("workloads") or {}
    if not isinstance(named, dict):
        raise CampaignError("params.yaml: pareto.workloads must map workload names to speeds")
    rows += [(str(w), _speed(v, f"pareto.workloads.{w}")) for w, v in named.items()]
    return rows


def create_cost_tables(con: duckdb.DuckDBPyConnection, prices: dict[str, Any] | None,
                       pareto: dict[str, Any] | None) -> None:
    """param_prices and param_pareto (the default row, its speed null when params sets none,
    and a row per workload that names its own)."""
    con.execute("create table param_prices (price_set varchar primary key, "
                "usd_per_gpu_hour double not null, source varchar not null)")
    rows = price_rows(prices)
    if rows:
        con.executemany("insert into param_prices values ($1, $2, $3)", rows)
    con.execute("create table param_pareto (workload varchar unique, compare_user_tok_s double)")
    con.executemany("insert into param_pareto values ($1, $2)", compare_speeds(pareto))

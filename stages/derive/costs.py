"""The settings the setup comparison reads from params.yaml, as derive's parameter tables:
`param_prices` (each price set of `prices`, in dollars per GPU-hour, with the source it cites) and
`param_pareto` (`pareto.compare_user_tok_s`, the decode speed per user at which setups are
compared along their Pareto frontiers). The marts pareto_points, pareto_compare and point_cost
read them.

Example (params.yaml):
    pareto: {compare_user_tok_s: 30}
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


def compare_speed(pareto: dict[str, Any] | None) -> float | None:
    """pareto.compare_user_tok_s, checked (None when not set)."""
    value = (pareto or {}).get("compare_user_tok_s")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise CampaignError(
            f"params.yaml: pareto.compare_user_tok_s must be a positive number, not {value!r}")
    return float(value)


def create_cost_tables(con: duckdb.DuckDBPyConnection, prices: dict[str, Any] | None,
                       pareto: dict[str, Any] | None) -> None:
    """param_prices and param_pareto (one row, its speed null when params sets none)."""
    con.execute("create table param_prices (price_set varchar primary key, "
                "usd_per_gpu_hour double not null, source varchar not null)")
    rows = price_rows(prices)
    if rows:
        con.executemany("insert into param_prices values ($1, $2, $3)", rows)
    con.execute("create table param_pareto (compare_user_tok_s double)")
    con.execute("insert into param_pareto values ($1)", [compare_speed(pareto)])

"""Derive: build the public tables from the warehouse with the SQL models, check, export.

The models live in `stages/derive/sql/` (staging, intermediate, marts; the catalogue, stages/core/catalogue.py, lists them)
and run in dependency order against a fresh `campaign.duckdb`, with the warehouse attached
read-only as `raw`. The rules and workloads from params enter only as bound parameters (the rules
shared by every run) and the `param_rules` and `param_workloads` tables, keyed by profile: each run
is judged by its own profile's rules and sized by its own profile's workloads (int_run_params).
The engines' own defaults (`sql/intermediate/engine_defaults.yaml`) enter as `param_seq_caps`.
The invariants in `stages/derive/sql/marts/schema.yaml` run as the marts are built, before anything
is exported: a row that breaks one is held back in the public `quarantine` table and the rest is
published (stages/derive/quarantine.py); in strict mode a broken one raises `DataTestError` and
leaves the previous outputs in place. Every output is built beside its place under a name of this
process (stages.core.files.scratch: `.<name>.tmp-<pid>-<thread>`) and renamed into place only when
all of them are complete, so no reader ever sees a half-built database or folder.

Example:
    from stages.derive import stage as derive
    derive.run(warehouse=Path("data/warehouse.duckdb"), campaign_db=Path("data/campaign.duckdb"),
               derived_dir=Path("data/derived"), metrics_file=Path("data/metrics.json"),
               **config.derive_settings(params))
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import duckdb

from stages.core import catalogue
from stages.derive import launch_plan_rows
from stages.derive.costs import create_cost_tables
from stages.derive.quarantine import QUARANTINE, DataTestError, Tester, columns_of  # noqa: F401 (DataTestError: raised here for callers)
from stages.core.config import CampaignError
from stages.core.params_check import SHARED_RULES
from stages.derive.params_tables import (create_param_tables, energy_values, engine_default_rows, param_rows,
                                         rule_values, slo_rows)
from stages.core.files import (built_beside, remove_path, scratch, stale_scratch, swap_in,
                               write_atomic)
from stages.planning.plans import MEMORY_ERROR_PATTERN

SQL_DIR = catalogue.SQL_DIR   # staging, intermediate, marts (a test may point it elsewhere)

# The models, from their files and stages/derive/sql/marts/schema.yaml (stages/core/catalogue.py). `run` reads
# them again from SQL_DIR, so that a test can point derive at another folder.
MODELS = catalogue.models(SQL_DIR)
STAGING_MODELS: dict[str, str] = MODELS.staging       # model -> the raw table it reads
INTERMEDIATE_MODELS: tuple[str, ...] = MODELS.intermediate
MART_MODELS: tuple[str, ...] = MODELS.marts             # in build order
PUBLIC_TABLES: tuple[str, ...] = MODELS.public         # in schema.yaml's order
_PARAM_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_COMMENT_RE = re.compile(r"--[^\n]*")


# ---------------------------------------------------------------------------------------------
# Inputs


def model_sql(name: str, sql_dir: Path | None = None) -> str:
    """The SQL text of a model, found by its layer prefix."""
    layer = "staging" if name.startswith("stg_") else "intermediate" if name.startswith("int_") else "marts"
    return ((sql_dir or SQL_DIR) / layer / f"{name}.sql").read_text().strip().rstrip(";")


def bind(sql: str, values: dict[str, Any]) -> dict[str, Any]:
    """The named parameters a statement uses, with their values."""
    names = set(_PARAM_RE.findall(_COMMENT_RE.sub("", sql)))
    unknown = names - set(values)
    if unknown:
        raise CampaignError(f"SQL uses unknown parameter(s): {', '.join(sorted(unknown))}")
    return {n: values[n] for n in names}


def load_schema(sql_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """schema.yaml's entry of each public table, in its order: what derive tests and exports."""
    return catalogue.models(sql_dir or SQL_DIR).schema


# ---------------------------------------------------------------------------------------------
# Building


def attach_warehouse(con: duckdb.DuckDBPyConnection, warehouse: Path,
                     models: catalogue.Models = MODELS) -> None:
    if not warehouse.is_file():
        raise CampaignError(f"{warehouse}: no warehouse (run `campaign ingest` first)")
    try:
        con.execute("attach $path as raw (read_only)", {"path": str(warehouse)})
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        raise CampaignError(f"{warehouse}: cannot open the warehouse: {first}") from None
    present = {r[0] for r in con.execute(
        "select table_name from duckdb_tables() where database_name = 'raw'").fetchall()}
    missing = sorted(set(models.staging.values()) - present)
    if missing:
        raise CampaignError(
            f"{warehouse}: missing table(s) {', '.join(missing)} (run `campaign ingest` again)")



def build_models(con: duckdb.DuckDBPyConnection, values: dict[str, Any],
                 models: catalogue.Models = MODELS, sql_dir: Path | None = None,
                 tester: Tester | None = None, before: dict[str, Any] | None = None) -> None:
    """Create every model as a table, in dependency order (the quarantine first), telling
    `tester` of each so that it tests them as they are built (stages/derive/quarantine.py).
    `before`: a function of the connection to call just before a model is built (the launches'
    plans before launch_plans)."""
    order = models.build_order()
    for name in sorted(order, key=lambda n: n != QUARANTINE):
        if before and name in before:
            before[name](con)
        sql = model_sql(name, sql_dir)
        try:
            con.execute(f"create table {name} as {sql}", bind(sql, values))
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0]
            raise CampaignError(f"model {name} failed: {first}") from None
        if tester is not None:
            tester.built(name)


# ---------------------------------------------------------------------------------------------
# Outputs


def export_csv(con: duckdb.DuckDBPyConnection, derived_dir: Path,
               schema: dict[str, dict[str, Any]]) -> None:
    """Each public table of `schema` to derived_dir/<table>.csv, ordered by its key."""
    derived_dir.mkdir(parents=True, exist_ok=True)
    for table, spec in schema.items():
        order = list(spec.get("unique") or []) or columns_of(con, table)
        with built_beside(derived_dir / f"{table}.csv") as partial:
            con.sql(f"select * from {table} order by {', '.join(order)}").write_csv(str(partial))


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    value = con.execute(sql).fetchone()[0]
    if isinstance(value, float):
        return round(value, 4)
    return int(value) if value is not None and not isinstance(value, bool) else value


HEADLINE_SQL: dict[str, str] = {
    "runs": "select count(*) from runs",
    "launches_ready": "select count(*) from launches where status = 'ready'",
    "launches_failed": "select count(*) from launches where status = 'failed'",
    "launches_interrupted": "select count(*) from launches where status = 'interrupted'",
    "run_events": "select count(*) from run_events",
    "gates_passed": "select count(*) from gates where not provisional",
    "gates_provisional": "select count(*) from gates where provisional",
    "bench_points": "select count(*) from bench_points",
    "capacity_limited_points": "select count(*) from bench_points where capacity_limited",
    "provisional_points": "select count(*) from bench_points where provisional",
    "bench_requests": "select count(*) from bench_requests",
    "invalid_rows": "select count(*) from invalid_rows",
    "invalid_requests": "select count(*) from bench_requests where not valid",
    "ingest_errors": "select count(*) from ingest_errors",
    "quarantined_rows": "select count(*) from quarantine",
    "best_output_tok_s": "select max(output_tok_s)::double from bench_points",
    "min_ttft_median_s": "select min(ttft_median_s)::double from bench_points",
    "max_sequences_fit": "select max(sequences)::bigint from sequences_fit",
    "turn_requests": "select count(*) from turn_requests",
    "ramp_turns": "select count(*) from ramp_turns",
    "ramp_needle_missed": "select count(*) from turn_requests where kind = 'ramp' and ok and not needle_ok",
    "agent_runs": "select count(*) from agent_runs",
    "nodes": "select count(*) from nodes",
    "node_busbw_peak_gbs": "select max(busbw_gbs)::double from node_allreduce_peak",
}


def headline_metrics(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    return {name: _scalar(con, sql) for name, sql in HEADLINE_SQL.items()}


def remove_stale(target: Path) -> None:
    """What a killed derive left beside `target` (its scratch paths, of a process gone)."""
    for left in stale_scratch(target):
        remove_path(left)


# ---------------------------------------------------------------------------------------------
# Entry


def run(*, warehouse: Path, campaign_db: Path, derived_dir: Path, metrics_file: Path,
        rules: dict, workloads: dict, profiles: dict[str, dict] | None = None,
        energy: dict | None = None, prices: dict | None = None, pareto: dict | None = None,
        strict: bool = True, slo: dict | None = None, planning: dict | None = None,
        models_dir: Path | None = None) -> dict:
    """Rebuild campaign_db from the warehouse, test it, export CSVs and headline metrics.

    Rows that break an invariant are held back in the `quarantine` table, and the rest published;
    with `strict` (the default here, the test suite's; `campaign derive` passes --strict), the
    first broken invariant raises DataTestError instead, one line per offending row.

    `rules` (every rule) and `workloads` are the active profile's; `profiles` gives each
    profile's own, {name: {"rules": ..., "workloads": ..., "slo": ...}} (config.derive_settings).
    A run is judged by its profile's; a run whose profile is not in `profiles`, by the active
    one's. `slo`: the active profile's service level objectives by workload (params.yaml `slo`).
    `energy` is params' energy settings (max_gap_s); without them no point's energy is valid.
    `planning`: params.yaml whole, and `models_dir` its models folder, for the launches' plans
    (launch_plans; without them each launch is `not planned`).
    Returns the number of rows of each public table.
    """
    values: dict[str, Any] = {k: v for k, v in rule_values(rules).items() if k in SHARED_RULES}
    values.update(energy_values(energy))
    values["memory_error_pattern"] = MEMORY_ERROR_PATTERN
    rule_rows, workload_rows_ = param_rows(rules, workloads, profiles)
    models = catalogue.models(SQL_DIR)
    schema = models.schema
    campaign_db, derived_dir = Path(campaign_db), Path(derived_dir)
    for target in (campaign_db, derived_dir, Path(metrics_file)):
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(target)
    building, exporting = scratch(campaign_db), scratch(derived_dir)
    remove_path(building)
    remove_path(exporting)
    con = duckdb.connect(str(building))
    try:
        con.execute("set TimeZone = 'UTC'")
        attach_warehouse(con, Path(warehouse), models)
        create_param_tables(con, rule_rows, workload_rows_, engine_default_rows(profiles),
                            slo_rows(slo) + [row for name, p in (profiles or {}).items()
                                             for row in slo_rows(p.get("slo"), str(name))])
        create_cost_tables(con, prices, pareto)
        tester = Tester(con, schema, values, marts=models.marts, strict=strict, bind=bind)
        build_models(con, values, models, SQL_DIR, tester, before={
            launch_plan_rows.BEFORE: lambda c: launch_plan_rows.create(c, planning, models_dir)})
        con.execute("detach raw")
        tester.settle()
        export_csv(con, exporting, schema)
        metrics = headline_metrics(con)
        summary = {t: con.execute(f"select count(*) from {t}").fetchone()[0] for t in schema}
        con.close()
    except BaseException:
        con.close()
        remove_path(building)
        remove_path(exporting)
        raise
    campaign_db.with_name(campaign_db.name + ".wal").unlink(missing_ok=True)
    os.replace(building, campaign_db)
    swap_in(exporting, derived_dir)
    write_atomic(Path(metrics_file), json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return summary


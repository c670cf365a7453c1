"""Derive: build the public tables from the warehouse with the SQL models, check, export.

The models live in `stages/derive/sql/` (staging, intermediate, marts; stages/derive/tables.py lists them)
and run in dependency order against a fresh `campaign.duckdb`, with the warehouse attached
read-only as `raw`. The rules and workloads from params enter only as bound parameters (the rules
shared by every run) and the `param_rules` and `param_workloads` tables, keyed by profile: each run
is judged by its own profile's rules and sized by its own profile's workloads (int_run_params).
The engines' own defaults (`sql/intermediate/engine_defaults.yaml`) enter as `param_seq_caps`.
The invariants in `stages/derive/sql/marts/schema.yaml` run as the marts are built, before anything
is exported: a row that breaks one is held back in the public `quarantine` table and the rest is
published (stages/derive/quarantine.py); in strict mode a broken one raises `DataTestError` and
leaves the previous outputs in place. Every output is built beside its
place under a name of this process (`<name>.tmp-<pid>`) and renamed into place only when all of
them are complete, so no reader ever sees a half-built database or folder.

Example:
    from stages.derive import stage as derive
    derive.run(warehouse=Path("data/warehouse.duckdb"), campaign_db=Path("data/campaign.duckdb"),
               derived_dir=Path("data/derived"), metrics_file=Path("data/metrics.json"),
               **config.derive_settings(params))
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import yaml

from stages.derive import tables
from stages.derive.costs import create_cost_tables
from stages.derive.quarantine import QUARANTINE, DataTestError, Tester, columns_of  # noqa: F401 (DataTestError: raised here for callers)
from stages.core.config import CampaignError
from stages.core.params_check import PROFILE_RULES, SHARED_RULES
from stages.core.files import replace_folder

SQL_DIR = tables.SQL_DIR      # staging, intermediate, marts (a test may point it elsewhere)

# The models, from their files and stages/derive/sql/marts/schema.yaml (stages/derive/tables.py). `run` reads
# them again from SQL_DIR, so that a test can point derive at another folder.
MODELS = tables.models(SQL_DIR)
STAGING_MODELS: dict[str, str] = MODELS.staging       # model -> the raw table it reads
INTERMEDIATE_MODELS: tuple[str, ...] = MODELS.intermediate
MART_MODELS: tuple[str, ...] = MODELS.marts             # in build order
PUBLIC_TABLES: tuple[str, ...] = MODELS.public         # in schema.yaml's order
RULE_KEYS: tuple[str, ...] = (*SHARED_RULES, *PROFILE_RULES)
# Engine defaults by engine, version and device (the sequence cap when none is given), each citing
# its source; read into param_seq_caps.
ENGINE_DEFAULTS = Path(__file__).parent / "sql" / "intermediate" / "engine_defaults.yaml"
_VERSION_RE = re.compile(r"\d+(?:\.\d+)*")
_PARAM_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_COMMENT_RE = re.compile(r"--[^\n]*")


# ---------------------------------------------------------------------------------------------
# Inputs


def rule_values(rules: dict[str, Any] | None) -> dict[str, float]:
    """The rules derive binds into its SQL, checked to be numbers."""
    rules = rules or {}
    missing = [k for k in RULE_KEYS if k not in rules]
    if missing:
        raise CampaignError(f"params.yaml: rules is missing {', '.join(missing)}")
    values: dict[str, float] = {}
    for key in RULE_KEYS:
        value = rules[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CampaignError(f"params.yaml: rules.{key} must be a number, not {value!r}")
        values[key] = value
    return values


def energy_values(energy: dict[str, Any] | None) -> dict[str, float | None]:
    """params' `energy` settings as derive binds them: $energy_max_gap_s (None: none given)."""
    if energy is None:
        return {"energy_max_gap_s": None}
    if not isinstance(energy, dict):
        raise CampaignError("params.yaml: energy must be a mapping with max_gap_s")
    value = energy.get("max_gap_s")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise CampaignError(f"params.yaml: energy.max_gap_s must be a positive number, not {value!r}")
    return {"energy_max_gap_s": float(value)}


def workload_rows(workloads: dict[str, Any] | None) -> list[tuple[str, int, int]]:
    """(workload, prompt_tokens, output_tokens) for each sweep workload in params, checked.
    Multi-turn workloads (with a `kind`) have no fixed prompt size and are left out."""
    rows = []
    for name, spec in sorted((workloads or {}).items()):
        if not isinstance(spec, dict):
            raise CampaignError(f"params.yaml: workloads.{name} must be a mapping")
        if "kind" in spec:
            continue
        for key in ("prompt_tokens", "output_tokens"):
            value = spec.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CampaignError(
                    f"params.yaml: workloads.{name}.{key} must be a positive integer, not {value!r}")
        rows.append((str(name), spec["prompt_tokens"], spec["output_tokens"]))
    return rows


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
    return tables.models(sql_dir or SQL_DIR).schema


# ---------------------------------------------------------------------------------------------
# Building


def attach_warehouse(con: duckdb.DuckDBPyConnection, warehouse: Path,
                     models: tables.Models = MODELS) -> None:
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


SLO_TARGETS = ("ttft_s", "tpot_ms")


def slo_rows(slo: dict[str, Any] | None, profile: str | None = None) -> list[tuple]:
    """param_slo rows (profile, workload, percentile, ttft_s, tpot_ms) of one profile's service
    level objectives (params.yaml `slo.<profile>`), checked: a percentile in (0, 100] and at least
    one target, each a positive number (a target left out does not apply)."""
    where = f"slo.{profile}" if profile else "slo"
    if slo is None:
        return []
    if not isinstance(slo, dict):
        raise CampaignError(f"params.yaml: {where} must map workloads to their objectives")
    rows = []
    for workload, entry in sorted(slo.items()):
        if not isinstance(entry, dict) or set(entry) - {"percentile", *SLO_TARGETS}:
            raise CampaignError(f"params.yaml: {where}.{workload} takes percentile, ttft_s and tpot_ms")
        values = [entry.get(k) for k in ("percentile", *SLO_TARGETS)]
        bad = [k for k, v in zip(("percentile", *SLO_TARGETS), values) if v is not None and (
            isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0)]
        if bad or values[0] is None or values[0] > 100 or all(v is None for v in values[1:]):
            raise CampaignError(f"params.yaml: {where}.{workload} needs a percentile in (0, 100] and "
                                f"ttft_s or tpot_ms, each a positive number")
        rows.append((profile, str(workload), *values))
    return rows


def param_rows(rules: dict[str, Any], workloads: dict[str, Any],
               profiles: dict[str, dict] | None) -> tuple[list[tuple], list[tuple]]:
    """(param_rules rows, param_workloads rows), checked: one per profile in `profiles`, and one
    with a null profile from `rules` and `workloads`, for runs of a profile params does not know."""
    groups = [(None, rules, workloads)] + [
        (str(name), p.get("rules"), p.get("workloads")) for name, p in (profiles or {}).items()]
    rule_rows, workload_rows_ = [], []
    for profile, its_rules, its_workloads in groups:
        values = rule_values(its_rules)
        rule_rows.append((profile, *(values[k] for k in PROFILE_RULES)))
        workload_rows_ += [(profile, *row) for row in workload_rows(its_workloads)]
    return rule_rows, workload_rows_


def version_key(text: Any) -> list[int] | None:
    """'0.8.0' -> [0, 8, 0]: an engine version as the list launches.sql compares."""
    m = _VERSION_RE.fullmatch(str(text)) if text is not None else None
    return [int(p) for p in m.group(0).split(".")] if m else None


def engine_default_rows(profiles: dict[str, dict] | None, path: Path = ENGINE_DEFAULTS) -> list[tuple]:
    """param_seq_caps rows, checked: each seq_cap entry of engine_defaults.yaml for each profile
    whose device it names, in the file's order (profile, position, engine, version_from,
    version_before, cap, per_tp, source)."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise CampaignError(f"{path.name}: cannot read it: {exc}") from None
    devices, entries = doc.get("devices") or {}, doc.get("seq_cap") or []
    rows = []
    for i, e in enumerate(entries, start=1):
        where = f"{path.name}: seq_cap entry {i}"
        bounds = {k: version_key(e.get(k)) for k in ("from", "before")}
        bad = [k for k in bounds if e.get(k) is not None and bounds[k] is None]
        cap = e.get("cap")
        if bad or isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise CampaignError(f"{where}: needs a positive integer cap and versions like 0.8.0")
        if not re.fullmatch(r"S\d+", str(e.get("source"))) or e.get("device") not in set(devices.values()):
            raise CampaignError(f"{where}: needs a source id (S12) and a device of `devices`")
        rows += [(str(name), i, str(e.get("engine")), bounds["from"], bounds["before"], cap,
                  bool(e.get("per_tp")), str(e["source"]))
                 for name in (profiles or {}) if devices.get(name) == e["device"]]
    return rows


def create_param_tables(con: duckdb.DuckDBPyConnection, rule_rows: list[tuple],
                        workload_rows_: list[tuple], seq_cap_rows: list[tuple] = (),
                        slo_rows_: list[tuple] = ()) -> None:
    """param_rules, param_workloads and param_slo, keyed by profile (null: the active profile's,
    for runs of a profile params does not know)."""
    con.execute(
        "create table param_rules (profile varchar unique, prefix_cache_tok_s double not null, "
        "default_max_num_seqs integer not null, burst_tpot_ms double not null)")
    con.executemany("insert into param_rules values ($1, $2::double, $3::integer, $4::double)", rule_rows)
    con.execute(
        "create table param_workloads (profile varchar, workload varchar not null, "
        "prompt_tokens bigint not null, output_tokens bigint not null, unique (profile, workload))")
    if workload_rows_:
        con.executemany("insert into param_workloads values ($1, $2, $3, $4)", workload_rows_)
    con.execute(
        "create table param_seq_caps (profile varchar not null, position integer not null, "
        "engine varchar not null, version_from integer[], version_before integer[], "
        "cap integer not null, per_tp boolean not null, source varchar not null)")
    if seq_cap_rows:
        con.executemany("insert into param_seq_caps values ($1, $2, $3, $4, $5, $6, $7, $8)",
                        list(seq_cap_rows))
    con.execute(
        "create table param_slo (profile varchar, workload varchar not null, percentile double not null, "
        "ttft_s double, tpot_ms double, unique (profile, workload))")
    if slo_rows_:
        con.executemany("insert into param_slo values ($1, $2, $3::double, $4::double, $5::double)",
                        list(slo_rows_))


def build_models(con: duckdb.DuckDBPyConnection, values: dict[str, Any],
                 models: tables.Models = MODELS, sql_dir: Path | None = None,
                 tester: Tester | None = None) -> None:
    """Create every model as a table, in dependency order (the quarantine first), telling
    `tester` of each so that it tests them as they are built (stages/derive/quarantine.py)."""
    order = models.build_order()
    for name in sorted(order, key=lambda n: n != QUARANTINE):
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
        target = derived_dir / f"{table}.csv"
        partial = derived_dir / f".{table}.csv.tmp"
        con.sql(f"select * from {table} order by {', '.join(order)}").write_csv(str(partial))
        os.replace(partial, target)


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


def partial(path: Path, pid: int | None = None) -> Path:
    """Where this process builds `path` before renaming it into place: beside it."""
    return path.with_name(f"{path.name}.tmp-{pid or os.getpid()}")


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    building = partial(path)
    building.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(building, path)


def swap_in(built: Path, target: Path) -> None:
    """Put the folder `built` in place of `target` (in one step where the system can swap two
    paths); the old folder is removed once replaced. The caller holds the output's write lock."""
    _remove(replace_folder(built, target, target.with_name(f"{target.name}.old-{os.getpid()}")))


def _remove(path: Path | None) -> None:
    """A file, a database with its WAL, or a folder, if it is there."""
    if path is None:
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        for p in (path, path.with_name(path.name + ".wal")):
            p.unlink(missing_ok=True)


def remove_stale(target: Path) -> None:
    """What a killed derive left beside `target` (`.tmp-<pid>`, `.old-<pid>` of a process gone)."""
    for left in target.parent.glob(f"{glob.escape(target.name)}.*-*"):
        kind, _, pid = left.name[len(target.name) + 1:].partition("-")
        if kind in ("tmp", "old") and pid.isdigit() and not _alive(int(pid)):
            _remove(left)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)            # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:        # it exists, under another user
        pass
    return True


# ---------------------------------------------------------------------------------------------
# Entry


def run(*, warehouse: Path, campaign_db: Path, derived_dir: Path, metrics_file: Path,
        rules: dict, workloads: dict, profiles: dict[str, dict] | None = None,
        energy: dict | None = None, prices: dict | None = None, pareto: dict | None = None,
        strict: bool = True, slo: dict | None = None) -> dict:
    """Rebuild campaign_db from the warehouse, test it, export CSVs and headline metrics.

    Rows that break an invariant are held back in the `quarantine` table, and the rest published;
    with `strict` (the default here, the test suite's; `campaign derive` passes --strict), the
    first broken invariant raises DataTestError instead, one line per offending row.

    `rules` (every rule) and `workloads` are the active profile's; `profiles` gives each
    profile's own, {name: {"rules": ..., "workloads": ..., "slo": ...}} (config.derive_settings).
    A run is judged by its profile's; a run whose profile is not in `profiles`, by the active
    one's. `slo`: the active profile's service level objectives by workload (params.yaml `slo`).
    `energy` is params' energy settings (max_gap_s); without them no point's energy is valid.
    Returns the number of rows of each public table.
    """
    values: dict[str, Any] = {k: v for k, v in rule_values(rules).items() if k in SHARED_RULES}
    values.update(energy_values(energy))
    rule_rows, workload_rows_ = param_rows(rules, workloads, profiles)
    models = tables.models(SQL_DIR)
    schema = models.schema
    campaign_db, derived_dir = Path(campaign_db), Path(derived_dir)
    for target in (campaign_db, derived_dir, Path(metrics_file)):
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(target)
    building, exporting = partial(campaign_db), partial(derived_dir)
    _remove(building)
    _remove(exporting)
    con = duckdb.connect(str(building))
    try:
        con.execute("set TimeZone = 'UTC'")
        attach_warehouse(con, Path(warehouse), models)
        create_param_tables(con, rule_rows, workload_rows_, engine_default_rows(profiles),
                            slo_rows(slo) + [row for name, p in (profiles or {}).items()
                                             for row in slo_rows(p.get("slo"), str(name))])
        create_cost_tables(con, prices, pareto)
        tester = Tester(con, schema, values, marts=models.marts, strict=strict, bind=bind)
        build_models(con, values, models, SQL_DIR, tester)
        con.execute("detach raw")
        tester.settle()
        export_csv(con, exporting, schema)
        metrics = headline_metrics(con)
        summary = {t: con.execute(f"select count(*) from {t}").fetchone()[0] for t in schema}
        con.close()
    except BaseException:
        con.close()
        _remove(building)
        _remove(exporting)
        raise
    campaign_db.with_name(campaign_db.name + ".wal").unlink(missing_ok=True)
    os.replace(building, campaign_db)
    swap_in(exporting, derived_dir)
    write_json(Path(metrics_file), metrics)
    return summary


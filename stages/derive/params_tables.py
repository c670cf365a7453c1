"""What derive takes from params.yaml, checked: the rules it binds into its SQL (rule_values,
energy_values) and the parameter tables it creates in the campaign database (create_param_tables:
param_rules and param_workloads keyed by profile, param_seq_caps from the engines' own defaults,
param_slo). A bad value is one CampaignError line naming its params key.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import yaml

from stages.core.config import CampaignError
from stages.core.params_check import OFF_WHEN_ABSENT, PROFILE_RULES, SHARED_RULES

SLO_TARGETS = ("ttft_s", "tpot_ms")     # the targets a params slo entry may set, besides its percentile
RULE_KEYS: tuple[str, ...] = (*SHARED_RULES, *PROFILE_RULES)
# Engine defaults by engine, version and device (the sequence cap when none is given), each citing
# its source; read into param_seq_caps.
ENGINE_DEFAULTS = Path(__file__).parent / "sql" / "intermediate" / "engine_defaults.yaml"
_VERSION_RE = re.compile(r"\d+(?:\.\d+)*")


def rule_values(rules: dict[str, Any] | None) -> dict[str, float]:
    """The rules derive binds into its SQL, checked to be numbers; a rule of OFF_WHEN_ABSENT that
    `rules` lacks is bound as null (its check off)."""
    rules = rules or {}
    missing = [k for k in RULE_KEYS if k not in rules and k not in OFF_WHEN_ABSENT]
    if missing:
        raise CampaignError(f"params.yaml: rules is missing {', '.join(missing)}")
    values: dict[str, float | None] = {}
    for key in RULE_KEYS:
        if key not in rules:
            values[key] = None
            continue
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
        "default_max_num_seqs integer not null, burst_tpot_ms double not null, "
        "cached_mark_pct double not null)")
    con.executemany("insert into param_rules values ($1, $2::double, $3::integer, $4::double, $5::double)",
                    rule_rows)
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

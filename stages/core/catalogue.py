"""The table catalogue: the models derive builds, each declared once, where it is defined (the raw
tables they read are declared in stages/core/raw_schema.py). Derive builds and tests them; render
lists, documents and serves the public ones. It reads derive's SQL folder by path and imports no
stage.

- Staging models: the files `stages/derive/sql/staging/stg_*.sql`, each reading the one raw table it names
  as `raw.<table>`, listed in the order of those raw tables.
- Intermediate models: the files `stages/derive/sql/intermediate/int_*.sql`, listed in the order the
  marts first read them: what the marts are built from and nothing publishes. One may read staging
  models, other intermediate models and marts (int_run_gate_flags reads gates).
- Marts: the entries of `stages/derive/sql/marts/schema.yaml`, in the order the Warehouse page and the
  exports list them, each with its file `stages/derive/sql/marts/<name>.sql`; `public: false` marks a mart
  built for other marts and not published.

Models are built in an order computed from the models each one's SQL reads (the tables it names
after `from` or `join`); a CTE may not take a model's name, which would hide the model it shadows.

Example:
    from stages.core import catalogue
    catalogue.models().public                  # ("runs", "launches", ...)
    catalogue.public_tables()                  # the same, read once
"""
from __future__ import annotations

import copy
import functools

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from stages.core.config import CampaignError
from stages.core.raw_schema import raw_tables

SQL_DIR = Path(__file__).parent.parent / "derive" / "sql"     # derive's models
MART_KEYS = {"public", "description", "columns", "unique", "not_null", "checks"}
_COMMENT_OR_TEXT = re.compile(r"--[^\n]*|'(?:[^']|'')*'")
_RAW_READ = re.compile(r"\braw\.([a-z_][a-z0-9_]*)")
_READ = re.compile(r"\b(?:from|join)\s+([a-z_][a-z0-9_]*)\b(?!\s*\()")      # a table, not a function
_CTE = re.compile(r"(?:\bwith(?:\s+recursive)?|,)\s*([a-z_][a-z0-9_]*)\s+as\s+(?:not\s+)?(?:materialized\s+)?\(")


# ---------------------------------------------------------------- models

@dataclass(frozen=True)
class Models:
    staging: dict[str, str]          # model -> the raw table it reads, in raw.sql's order
    intermediate: tuple[str, ...]    # in build order
    marts: tuple[str, ...]           # every mart, in build order
    public: tuple[str, ...]          # the public marts, in schema.yaml's order
    schema: dict[str, dict[str, Any]]  # schema.yaml's entry of each public mart
    built: tuple[str, ...]           # intermediate models and marts, each after what it reads

    def build_order(self) -> tuple[str, ...]:
        return (*self.staging, *self.built)


def code_only(sql: str) -> str:
    """SQL without its comments and string literals."""
    return _COMMENT_OR_TEXT.sub(" ", sql)


def reads(sql: str, names: set[str]) -> set[str]:
    """Which of `names` a model's SQL reads: the tables its code names after `from` or `join` (a
    table's alias, `stg_runs as runs`, is not read; models() refuses a CTE named like a model)."""
    return set(_READ.findall(code_only(sql).lower())) & names


def shadowed(sql: str, names: set[str]) -> set[str]:
    """Which of `names` a model's SQL defines again as its own CTEs (`with runs as (...)`)."""
    return set(_CTE.findall(code_only(sql).lower())) & names


def load_marts(path: Path) -> dict[str, dict[str, Any]]:
    """schema.yaml: every mart's entry, in its order, checked for shape."""
    stat = path.stat()
    return copy.deepcopy(_load_marts(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _load_marts(path: Path, _mtime_ns: int, _size: int) -> dict[str, dict[str, Any]]:
    """load_marts, read once per version of the file (render asks for it several times)."""
    try:
        data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError as exc:
        raise CampaignError(f"{path.name}: not valid YAML: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise CampaignError(f"{path.name}: must map each mart to its entry")
    for name, spec in data.items():
        if not isinstance(spec, dict):
            raise CampaignError(f"{path.name}: {name}: must be a mapping")
        unknown = set(spec) - MART_KEYS
        if unknown:
            raise CampaignError(f"{path.name}: {name}: unknown key(s) {', '.join(sorted(unknown))}")
        if not isinstance(spec.get("public", True), bool):
            raise CampaignError(f"{path.name}: {name}: public must be true or false")
    return data


def _staging(sql_dir: Path, raw_order: list[str]) -> dict[str, str]:
    found = {}
    for path in sorted((sql_dir / "staging").glob("stg_*.sql")):
        read = sorted(set(_RAW_READ.findall(code_only(path.read_text()))))
        if len(read) != 1 or read[0] not in raw_order:
            raise CampaignError(f"{path.name}: a staging model reads one raw table of raw.sql, "
                                f"not {', '.join(read) or 'none'}")
        found[path.stem] = read[0]
    return dict(sorted(found.items(), key=lambda item: (raw_order.index(item[1]), item[0])))


def build_order(sql: dict[str, str]) -> tuple[str, ...]:
    """The models of `sql` (name -> SQL, in order of preference), each after the ones it reads."""
    needs = {name: reads(text, set(sql)) - {name} for name, text in sql.items()}
    order: list[str] = []
    while len(order) < len(sql):
        ready = [n for n in sql if n not in order and needs[n] <= set(order)]
        if not ready:
            stuck = sorted(n for n in sql if n not in order)
            raise CampaignError(f"models read one another in a cycle: {', '.join(stuck)}")
        order.append(ready[0])
    return tuple(order)


def models(sql_dir: Path = SQL_DIR) -> Models:
    """The models of an SQL folder: staging, intermediate and marts, with the public marts."""
    raw_order = [t.name for t in raw_tables()]
    staging = _staging(sql_dir, raw_order)
    schema_file = sql_dir / "marts" / "schema.yaml"
    marts = load_marts(schema_file)
    files = {p.stem for p in (sql_dir / "marts").glob("*.sql")}
    if files != set(marts):
        problems = [f"{n}.sql has no entry" for n in sorted(files - set(marts))]
        problems += [f"{n} has no {n}.sql" for n in sorted(set(marts) - files)]
        raise CampaignError(f"{schema_file.name}: " + "; ".join(problems))
    mart_sql = {n: (sql_dir / "marts" / f"{n}.sql").read_text() for n in marts}
    intermediate = {p.stem: p.read_text() for p in (sql_dir / "intermediate").glob("int_*.sql")}
    first_use = {n: next((i for i, sql in enumerate(mart_sql.values()) if n in reads(sql, {n})),
                         len(mart_sql)) for n in intermediate}
    intermediate = dict(sorted(intermediate.items(), key=lambda item: (first_use[item[0]], item[0])))
    every = {**intermediate, **mart_sql}
    names = set(staging) | set(every)
    shadows = [f"{n} ({', '.join(sorted(shadowed(sql, names)))})" for n, sql in every.items()
               if shadowed(sql, names)]
    if shadows:
        raise CampaignError(f"CTEs named like a model, which the build order cannot tell from it: "
                            f"{'; '.join(shadows)}")
    order = build_order(every)
    public = tuple(n for n, spec in marts.items() if spec.get("public", True))
    return Models(staging=staging,
                  intermediate=tuple(n for n in order if n in intermediate),
                  marts=tuple(n for n in order if n in mart_sql),
                  public=public,
                  schema={n: marts[n] for n in public},
                  built=order)


@functools.cache
def public_tables() -> tuple[str, ...]:
    """The public tables of derive's SQL folder, in schema.yaml's order (read once a process)."""
    return models(SQL_DIR).public

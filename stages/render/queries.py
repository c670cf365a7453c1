"""Where a fact's or a row query's SQL comes from: a fact is a `.sql` file of the facts folder or
an entry of its columns.yaml, whose query is generated (stages.render.declared); a row query is a `.sql` file
of the render folder. Also the parameters a query binds and the public tables it reads."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from stages.core.catalogue import public_tables
from stages.render.declared import NAME
from stages.render.declared_file import column_facts
from stages.render.errors import FactError

SQL_DIR = Path(__file__).parent / "sql"
PROJECT = Path(__file__).resolve().parents[2]    # where stage code is shown from
FACTS_SQL = SQL_DIR / "facts"
COLUMN_FACTS = "columns.yaml"  # in the facts folder: the facts declared, not written as SQL
ROWS_SQL = SQL_DIR / "render"


def sql_params(sql: str) -> list[str]:
    """Named parameters ($name) a query binds, in order of first use."""
    return list(_sql_params(sql))


@lru_cache(maxsize=1024)
def _sql_params(sql: str) -> tuple[str, ...]:
    stripped = re.sub(r"--[^\n]*", "", sql)
    stripped = re.sub(r"'(?:[^']|'')*'", "''", stripped)
    seen: list[str] = []
    for name in re.findall(r"\$([a-z_][a-z0-9_]*)", stripped):
        if name not in seen:
            seen.append(name)
    return tuple(seen)


def tables_in(sql: str) -> list[str]:
    """The public tables a query names."""
    return list(_tables_in(sql))


@lru_cache(maxsize=1024)
def _tables_in(sql: str) -> tuple[str, ...]:
    return tuple(t for t in public_tables() if re.search(rf"\b{t}\b", sql))


def load_query(directory: Path, name: str, kind: str) -> str:
    if not NAME.match(name or ""):
        raise FactError(f"bad {kind} name {name!r}")
    path = directory / f"{name}.sql"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in directory.glob("*.sql"))) or "none"
        raise FactError(f"unknown {kind} {name!r} (known: {known})")
    return path.read_text()


def fact_sql(name: str, directory: Path = FACTS_SQL) -> str:
    """The query of fact `name`: generated from its columns.yaml entry, or its .sql file."""
    if not NAME.match(name or ""):
        raise FactError(f"bad fact name {name!r}")
    declared = column_facts(directory / COLUMN_FACTS)
    path = directory / f"{name}.sql"
    if name in declared:
        if path.exists():
            raise FactError(f"fact {name!r} is both declared in {COLUMN_FACTS} and a .sql file")
        return declared[name].sql()
    if path.is_file():
        return path.read_text()
    known = sorted({p.stem for p in directory.glob("*.sql")} | set(declared))
    raise FactError(f"unknown fact {name!r} (known: {', '.join(known) or 'none'})")


def fact_query_path(name: str, directory: Path = FACTS_SQL) -> str:
    """Where fact `name`'s query is written, as a reader finds it: its .sql file, or its entry
    in columns.yaml."""
    project = PROJECT
    shown = directory.relative_to(project) if directory.is_relative_to(project) else directory
    if name in column_facts(directory / COLUMN_FACTS):
        return f"{(shown / COLUMN_FACTS).as_posix()} ({name})"
    return (shown / f"{name}.sql").as_posix()

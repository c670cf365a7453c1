"""Where a fact's or a row query's SQL comes from: a fact is a `.sql` file of the facts folder or
an entry of its columns.yaml, whose query is generated (ColumnFact); a row query is a `.sql` file
of the render folder. Also the parameters a query binds and the public tables it reads."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from stages.derive.stage import PUBLIC_TABLES
from stages.render.errors import FactError

SQL_DIR = Path(__file__).parent / "sql"
PROJECT = Path(__file__).resolve().parents[2]    # where stage code is shown from
FACTS_SQL = SQL_DIR / "facts"
COLUMN_FACTS = "columns.yaml"  # in the facts folder: the facts declared, not written as SQL
ROWS_SQL = SQL_DIR / "render"
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")   # a column or table name a declaration may give
LITERAL = re.compile(r"^[A-Za-z0-9_.-]+$")       # a fixed filter's value, written as a SQL string
NOTE = re.compile(r"[^'\\\n\r;]+")                 # a no_line note, written as a SQL string
UNIT = re.compile(r"^[A-Za-z0-9%/ ._-]+$")
EXPRESSION_TOKEN = re.compile(r"\s*(?:([a-z_][a-z0-9_]*)|\d+(?:\.\d+)?|[-+*/(),])")
EXPRESSION_FUNCTIONS = frozenset({"nullif"})


def sql_params(sql: str) -> list[str]:
    """Named parameters ($name) a query binds, in order of first use."""
    stripped = re.sub(r"--[^\n]*", "", sql)
    stripped = re.sub(r"'(?:[^']|'')*'", "''", stripped)
    seen: list[str] = []
    for name in re.findall(r"\$([a-z_][a-z0-9_]*)", stripped):
        if name not in seen:
            seen.append(name)
    return seen


def tables_in(sql: str) -> list[str]:
    return [t for t in PUBLIC_TABLES if re.search(rf"\b{t}\b", sql)]


def load_query(directory: Path, name: str, kind: str) -> str:
    if not NAME.match(name or ""):
        raise FactError(f"bad {kind} name {name!r}")
    path = directory / f"{name}.sql"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in directory.glob("*.sql"))) or "none"
        raise FactError(f"unknown {kind} {name!r} (known: {known})")
    return path.read_text()


@dataclass(frozen=True)
class ColumnFact:
    """A fact declared in columns.yaml: `value` (a column, or arithmetic over columns) of the one
    row of `table` that the bound `keys` and the fixed `where` pick."""
    name: str
    table: str
    value: str
    unit: str | None
    keys: tuple[str, ...]
    where: tuple[tuple[str, str], ...]
    line: str | None   # the columns <line>_file, <line>_line hold the raw line; None: no line does
    description: str
    no_line: str | None = None   # why no raw line holds the value, when none does

    def columns(self) -> set[str]:
        """The table's columns the query names."""
        named = {m for m in EXPRESSION_TOKEN.findall(self.value) if m} - EXPRESSION_FUNCTIONS
        lines = {f"{self.line}_file", f"{self.line}_line"} if self.line else set()
        return named | set(self.keys) | {c for c, _ in self.where} | lines

    def sql(self) -> str:
        """The query, in the shape of a fact's SQL file."""
        conditions = [f"{k} = ${k}" for k in self.keys] + [f"{c} = '{v}'" for c, v in self.where]
        unit = f"'{self.unit}'" if self.unit is not None else "cast(null as varchar)"
        run_id = "run_id" if "run_id" in self.keys else "cast(null as varchar)"
        note = ("" if self.no_line is None else f"        '{self.no_line}' as source_note,\n"
                if self.line is None else
                f"        case when {self.line}_file is null then '{self.no_line}' end as source_note,\n")
        source = (("cast(null as varchar)", "cast(null as integer)") if self.line is None
                  else (f"{self.line}_file", f"{self.line}_line"))
        return (
            f"-- {self.description}\n"
            "with source as (\n"
            "    select *\n"
            f"    from {self.table}\n"
            f"    where {' and '.join(conditions)}\n"
            "),\n"
            "\n"
            "final as (\n"
            "    select\n"
            f"        {self.value} as value,\n"
            f"        {unit} as unit,\n"
            f"        {run_id} as run_id,\n"
            f"{note}"
            f"        {source[0]} as source_file,\n"
            f"        {source[1]} as source_line\n"
            "    from source\n"
            ")\n"
            "\n"
            "select * from final\n")


def _declared(path: Path, where: str, value: Any, pattern: re.Pattern, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise FactError(f"{path.name}: {where}: bad {what} {value!r}")
    return value


def _expression(path: Path, name: str, text: Any) -> str:
    """A value expression: column names, numbers, + - * / ( ) , and the functions allowed."""
    if not isinstance(text, str) or not text.strip() or "--" in text:
        raise FactError(f"{path.name}: {name}: bad value {text!r}")
    pos = 0
    while pos < len(text.rstrip()):
        m = EXPRESSION_TOKEN.match(text, pos)
        if not m:
            raise FactError(f"{path.name}: {name}: value {text!r} is not a column or plain arithmetic")
        pos = m.end()
    return text.strip()


def _column_fact(path: Path, group: dict, name: Any, entry: Any) -> ColumnFact:
    name = _declared(path, "fact", name, NAME, "name")
    if not isinstance(entry, dict) or set(entry) - {"value", "unit", "line", "no_line", "description"}:
        raise FactError(f"{path.name}: {name}: an entry has value, unit, line, no_line and description only")
    description = entry.get("description")
    if not isinstance(description, str) or not description.strip() or "\n" in description.strip():
        raise FactError(f"{path.name}: {name}: the description is one line of text")
    unit = entry.get("unit")
    no_line = entry.get("no_line")
    if no_line is not None and (not isinstance(no_line, str) or not NOTE.fullmatch(no_line.strip())):
        raise FactError(f"{path.name}: {name}: no_line is one line of text without quotes")
    line = entry.get("line", "source")
    if line == "none" and no_line is None:
        raise FactError(f"{path.name}: {name}: line none needs no_line, saying why no raw line holds it")
    return ColumnFact(
        name=name, table=group["table"], value=_expression(path, name, entry.get("value")),
        unit=None if unit is None else _declared(path, name, unit, UNIT, "unit"),
        keys=group["keys"], where=group["where"],
        line=None if line == "none" else _declared(path, name, line, IDENTIFIER, "line"),
        description=description.strip(), no_line=None if no_line is None else no_line.strip())


@lru_cache(maxsize=8)
def column_facts(path: Path) -> dict[str, ColumnFact]:
    """The facts declared in `path` (a columns.yaml), by name; none when there is no such file."""
    if not path.is_file():
        return {}
    try:
        groups = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise FactError(f"{path.name}: not valid YAML ({exc})".splitlines()[0]) from None
    if not isinstance(groups, list):
        raise FactError(f"{path.name}: expected a list of tables with their facts")
    out: dict[str, ColumnFact] = {}
    for raw in groups:
        if not isinstance(raw, dict) or set(raw) - {"table", "keys", "where", "facts"}:
            raise FactError(f"{path.name}: a group has table, keys, where and facts only")
        table = raw.get("table")
        if table not in PUBLIC_TABLES:
            raise FactError(f"{path.name}: {table!r} is not a public table")
        keys = raw.get("keys")
        if not isinstance(keys, list) or not keys:
            raise FactError(f"{path.name}: {table}: keys is a list of the columns bound as parameters")
        group = {
            "table": table,
            "keys": tuple(_declared(path, table, k, IDENTIFIER, "key") for k in keys),
            "where": tuple((_declared(path, table, c, IDENTIFIER, "filter column"),
                            _declared(path, table, v, LITERAL, "filter value"))
                           for c, v in (raw.get("where") or {}).items()),
        }
        for name, entry in (raw.get("facts") or {}).items():
            if name in out:
                raise FactError(f"{path.name}: fact {name!r} declared twice")
            out[name] = _column_fact(path, group, name, entry)
    return out


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

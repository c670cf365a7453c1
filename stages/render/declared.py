"""Facts declared in the facts folder's columns.yaml instead of written as SQL: the kinds of
declaration, checked as they are read, and the query each one generates."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from stages.derive.stage import PUBLIC_TABLES
from stages.render.errors import FactError

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")   # a column or table name a declaration may give
LITERAL = re.compile(r"^[A-Za-z0-9_.-]+$")       # a fixed filter's value, written as a SQL string
NOTE = re.compile(r"[^'\\\n\r;]+")                 # a no_line note, written as a SQL string
UNIT = re.compile(r"^[A-Za-z0-9%/ ._-]+$")
EXPRESSION_TOKEN = re.compile(r"\s*(?:([a-z_][a-z0-9_]*)|\d+(?:\.\d+)?|[-+*/(),])")
EXPRESSION_FUNCTIONS = frozenset({"nullif"})

# how a declared fact may print its value (`display:`), as SQL over the value expression
DISPLAYS = {
    "bytes": (  # binary units, when the value is a whole number of them
        "case\n"
        "            when {v} >= 1073741824 and {v} % 1073741824 = 0\n"
        "                then ({v} // 1073741824)::varchar || ' GiB'\n"
        "            when {v} >= 1048576 and {v} % 1048576 = 0\n"
        "                then ({v} // 1048576)::varchar || ' MiB'\n"
        "            when {v} >= 1024 and {v} % 1024 = 0\n"
        "                then ({v} // 1024)::varchar || ' KiB'\n"
        "            else {v}::varchar || ' B'\n"
        "        end"),
}


def unit_sql(unit: str | None) -> str:
    """A declared unit as the SQL of the unit column."""
    return f"'{unit}'" if unit is not None else "cast(null as varchar)"


@dataclass(frozen=True)
class ColumnFact:
    """A fact declared in columns.yaml: `value` (a column, or arithmetic over columns) of the one
    row of `table` that the bound `keys` and the fixed `where` pick (with `order`, the first row
    in that order whose first ordering column is not null)."""
    name: str
    table: str
    value: str
    unit: str | None
    keys: tuple[str, ...]
    where: tuple[tuple[str, str], ...]
    line: str | None   # the columns <line>_file, <line>_line hold the raw line; None: no line does
    description: str
    order: tuple[str, ...] = ()     # `column` or `column desc`
    display: str | None = None      # a key of DISPLAYS
    no_line: str | None = None      # why no raw line holds the value, when none does
    no_line_when: tuple[str, tuple[tuple[str, str], ...]] | None = None  # (column, ((value, note),))

    def columns(self) -> set[str]:
        """The table's columns the query names."""
        named = {m for m in EXPRESSION_TOKEN.findall(self.value) if m} - EXPRESSION_FUNCTIONS
        lines = {f"{self.line}_file", f"{self.line}_line"} if self.line else set()
        when = {self.no_line_when[0]} if self.no_line_when else set()
        return named | set(self.keys) | {c for c, _ in self.where} | \
            {o.split()[0] for o in self.order} | lines | when

    def named_columns(self) -> dict[str, set[str]]:
        """The columns the query names, by table."""
        return {self.table: self.columns()}

    def sql(self) -> str:
        """The query, in the shape of a fact's SQL file."""
        conditions = [f"{k} = ${k}" for k in self.keys] + [f"{c} = '{v}'" for c, v in self.where]
        if self.order:
            conditions.append(f"{self.order[0].split()[0]} is not null")
        ordered = f"    order by {', '.join(self.order)}\n    limit 1\n" if self.order else ""
        shown = self.value if IDENTIFIER.fullmatch(self.value) else f"({self.value})"
        display = f"        {DISPLAYS[self.display].format(v=shown)} as display,\n" \
            if self.display else ""
        run_id = "run_id" if "run_id" in self.keys else "cast(null as varchar)"
        column, notes = self.no_line_when or ("", ())
        cases = "".join(f"when {column} = '{v}' then '{n}' " for v, n in notes)
        text = f"case {cases}else '{self.no_line}' end" if notes else f"'{self.no_line}'"
        note = ("" if self.no_line is None else f"        {text} as source_note,\n"
                if self.line is None else
                f"        case when {self.line}_file is null then {text} end as source_note,\n")
        source = (("cast(null as varchar)", "cast(null as integer)") if self.line is None
                  else (f"{self.line}_file", f"{self.line}_line"))
        return (
            f"-- {self.description}\n"
            "with source as (\n"
            "    select *\n"
            f"    from {self.table}\n"
            f"    where {' and '.join(conditions)}\n"
            f"{ordered}"
            "),\n"
            "\n"
            "final as (\n"
            "    select\n"
            f"        {self.value} as value,\n"
            f"{display}"
            f"        {unit_sql(self.unit)} as unit,\n"
            f"        {run_id} as run_id,\n"
            f"{note}"
            f"        {source[0]} as source_file,\n"
            f"        {source[1]} as source_line\n"
            "    from source\n"
            ")\n"
            "\n"
            "select * from final\n")


@dataclass(frozen=True)
class CountFact:
    """A fact declared in a `count:` group of columns.yaml: how many rows of `table` (with
    `runs`, how many distinct runs) the bound `keys` and the fixed `where` pick, listing those
    runs. A column written `runs.<column>` is the run's, joined on run_id."""
    name: str
    table: str
    keys: tuple[str, ...]
    where: tuple[tuple[str, str | bool], ...]
    runs: bool
    unit: str | None
    description: str

    def _split(self, column: str) -> tuple[str, str]:
        """(table, column) of a declared column."""
        table, _, bare = column.rpartition(".")
        return (table or self.table), bare

    def _joined(self) -> bool:
        named = list(self.keys) + [c for c, _ in self.where]
        return self.table != "runs" and any(self._split(c)[0] == "runs" for c in named)

    def named_columns(self) -> dict[str, set[str]]:
        """The columns the query names, by table."""
        out: dict[str, set[str]] = {self.table: {"run_id"}}
        for column in list(self.keys) + [c for c, _ in self.where]:
            table, bare = self._split(column)
            out.setdefault(table, set()).add(bare)
        return out

    def sql(self) -> str:
        """The query, in the shape of a fact's SQL file."""
        def ref(column: str) -> str:
            table, bare = self._split(column)
            return f"{'r' if table != self.table else 't'}.{bare}"
        conditions = [f"{ref(k)} = ${self._split(k)[1]}" for k in self.keys] + [
            ref(c) if v is True else f"{ref(c)} = '{v}'" for c, v in self.where]
        join = "    inner join runs as r on r.run_id = t.run_id\n" if self._joined() else ""
        return (
            f"-- {self.description}\n"
            "with source as (\n"
            "    select t.run_id\n"
            f"    from {self.table} as t\n"
            f"{join}"
            f"    where {' and '.join(conditions)}\n"
            "),\n"
            "\n"
            "final as (\n"
            "    select\n"
            f"        count({'distinct run_id' if self.runs else '*'}) as value,\n"
            f"        {unit_sql(self.unit)} as unit,\n"
            "        list(distinct run_id order by run_id) as run_id,\n"
            "        cast(null as varchar) as source_file,\n"
            "        cast(null as integer) as source_line\n"
            "    from source\n"
            ")\n"
            "\n"
            "select * from final\n")


@dataclass(frozen=True)
class ChangeFact:
    """A fact declared in a `change:` group of columns.yaml: the change of a one-column fact from
    run $base_run_id to run $head_run_id, in percent of the base value (as `campaign diff`
    computes it); the parameter `by` names the item, and `items` the fact of each. A computed
    figure: it cites no raw line (the base and head values cite theirs); both runs are listed."""
    name: str
    by: str
    items: tuple[tuple[str, ColumnFact], ...]
    description: str

    def named_columns(self) -> dict[str, set[str]]:
        """The columns the query names, by table."""
        out: dict[str, set[str]] = {}
        for _, fact in self.items:
            out.setdefault(fact.table, set()).update(fact.columns())
        return out

    @staticmethod
    def _measured(item: str, fact: ColumnFact) -> str:
        """One item's value in the two runs."""
        conditions = ["run_id in ($base_run_id, $head_run_id)"] + \
            [f"{k} = ${k}" for k in fact.keys if k != "run_id"] + [f"{c} = '{v}'" for c, v in fact.where]
        return (
            f"    select '{item}' as item, run_id, ({fact.value})::double as value\n"
            f"    from {fact.table}\n"
            f"    where {' and '.join(conditions)}\n")

    def sql(self) -> str:
        """The query, in the shape of a fact's SQL file."""
        change = "100.0 * (head_value - base_value) / nullif(abs(base_value), 0)"
        return (
            f"-- {self.description}\n"
            "with measured as (\n"
            + "    union all\n".join(self._measured(item, fact) for item, fact in self.items) +
            "),\n"
            "\n"
            "base as (\n"
            f"    select * from measured where item = ${self.by} and run_id = $base_run_id\n"
            "),\n"
            "\n"
            "head as (\n"
            f"    select * from measured where item = ${self.by} and run_id = $head_run_id\n"
            "),\n"
            "\n"
            "paired as (\n"
            "    select base.value as base_value, head.value as head_value\n"
            "    from (select 1) as one\n"
            "    left join base on true\n"
            "    left join head on true\n"
            "),\n"
            "\n"
            "final as (\n"
            "    select\n"
            f"        {change} as value,\n"
            f"        printf('%+.1f', {change}) as display,\n"
            "        '%' as unit,\n"
            "        [$base_run_id, $head_run_id] as run_id,\n"
            f"        '{CHANGE_NOTE}' as source_note,\n"
            "        cast(null as varchar) as source_file,\n"
            "        cast(null as integer) as source_line\n"
            "    from paired\n"
            ")\n"
            "\n"
            "select * from final\n")


CHANGE_NOTE = "Computed from the base and head values, whose facts cite their own raw lines."
DeclaredFact = ColumnFact | CountFact | ChangeFact
ORDER = re.compile(r"^[a-z_][a-z0-9_]*(?: desc)?$")
RUN_COLUMN = re.compile(r"^(?:runs\.)?[a-z_][a-z0-9_]*$")  # a count's column, or its run's


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


def _description(path: Path, name: str, entry: dict) -> str:
    description = entry.get("description")
    if not isinstance(description, str) or not description.strip() or "\n" in description.strip():
        raise FactError(f"{path.name}: {name}: the description is one line of text")
    return description.strip()


def _unit(path: Path, name: str, entry: dict) -> str | None:
    unit = entry.get("unit")
    return None if unit is None else _declared(path, name, unit, UNIT, "unit")


def _column_fact(path: Path, group: dict, name: str, entry: Any) -> ColumnFact:
    if not isinstance(entry, dict) or \
            set(entry) - {"value", "unit", "line", "no_line", "no_line_when", "display", "description"}:
        raise FactError(f"{path.name}: {name}: an entry has value, unit, line, no_line, no_line_when, "
                        "display and description only")
    display = entry.get("display")
    if display is not None and display not in DISPLAYS:
        raise FactError(f"{path.name}: {name}: display is one of {', '.join(DISPLAYS)}")
    no_line = entry.get("no_line")
    if no_line is not None and (not isinstance(no_line, str) or not NOTE.fullmatch(no_line.strip())):
        raise FactError(f"{path.name}: {name}: no_line is one line of text without quotes")
    line = entry.get("line", "source")
    if line == "none" and no_line is None:
        raise FactError(f"{path.name}: {name}: line none needs no_line, saying why no raw line holds it")
    return ColumnFact(
        name=name, table=group["table"], value=_expression(path, name, entry.get("value")),
        unit=_unit(path, name, entry), keys=group["keys"], where=group["where"],
        line=None if line == "none" else _declared(path, name, line, IDENTIFIER, "line"),
        description=_description(path, name, entry), order=group["order"], display=display,
        no_line=None if no_line is None else no_line.strip(),
        no_line_when=_no_line_when(path, name, entry.get("no_line_when"), no_line))


def _no_line_when(path: Path, name: str, when: Any, no_line: str | None
                  ) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """`no_line_when: {column: {value: note}}` beside no_line; notes are one line without quotes."""
    if when is None:
        return None
    notes = next(iter(when.values())) if isinstance(when, dict) and len(when) == 1 else None
    if no_line is None or not isinstance(notes, dict) or not notes or not all(
            isinstance(v, str) and isinstance(n, str) and NOTE.fullmatch(v) and NOTE.fullmatch(n.strip())
            for v, n in notes.items()):
        raise FactError(f"{path.name}: {name}: no_line_when is {{column: {{value: note}}}} beside no_line")
    return (_declared(path, name, next(iter(when)), IDENTIFIER, "no_line_when column"),
            tuple((v, n.strip()) for v, n in notes.items()))


def _count_fact(path: Path, group: dict, name: str, entry: Any) -> CountFact:
    if not isinstance(entry, dict) or set(entry) - {"where", "of", "unit", "description"}:
        raise FactError(f"{path.name}: {name}: a count has where, of, unit and description only")
    if entry.get("of", "rows") not in ("rows", "runs"):
        raise FactError(f"{path.name}: {name}: of is rows or runs")
    where = entry.get("where") or {}
    if not isinstance(where, dict):
        raise FactError(f"{path.name}: {name}: where maps columns to values")
    return CountFact(
        name=name, table=group["table"], keys=group["keys"],
        where=tuple((_declared(path, name, c, RUN_COLUMN, "filter column"),
                     True if v is True else _declared(path, name, v, LITERAL, "filter value"))
                    for c, v in where.items()),
        runs=entry.get("of") == "runs", unit=_unit(path, name, entry),
        description=_description(path, name, entry))


def _change_fact(path: Path, by: str, name: str, entry: Any, declared: dict) -> ChangeFact:
    if not isinstance(entry, dict) or set(entry) - {"of", "description"} or \
            not isinstance(entry.get("of"), dict) or not entry["of"]:
        raise FactError(f"{path.name}: {name}: a change has of (item: fact) and description only")
    items = []
    for item, fact_name in entry["of"].items():
        fact = declared.get(fact_name)
        if not isinstance(fact, ColumnFact) or "run_id" not in fact.keys or fact.order:
            raise FactError(f"{path.name}: {name}: {fact_name!r} is not a declared column fact of a run")
        if items and fact.keys != items[0][1].keys:
            raise FactError(f"{path.name}: {name}: its facts are keyed alike")
        items.append((_declared(path, name, item, LITERAL, "item"), fact))
    return ChangeFact(name=name, by=by, items=tuple(items), description=_description(path, name, entry))


def _group(path: Path, raw: Any) -> dict:
    """A group of facts, its table, keys and fixed filters checked."""
    kinds = {"table", "count", "change"} & set(raw) if isinstance(raw, dict) else set()
    if len(kinds) != 1 or set(raw) - {"table", "count", "change", "keys", "where", "order", "facts"}:
        raise FactError(f"{path.name}: a group has table (or count, or change), keys, where, order "
                        "and facts only")
    [kind] = kinds
    if kind == "change":
        if set(raw) != {"change", "facts"}:
            raise FactError(f"{path.name}: a change group has change (its parameter) and facts only")
        return {"kind": kind, "by": _declared(path, "change", raw["change"], IDENTIFIER, "parameter")}
    table = raw[kind]
    if table not in PUBLIC_TABLES:
        raise FactError(f"{path.name}: {table!r} is not a public table")
    keys = raw.get("keys")
    if not isinstance(keys, list) or not keys:
        raise FactError(f"{path.name}: {table}: keys is a list of the columns bound as parameters")
    if kind == "count" and (raw.get("where") or raw.get("order")):
        raise FactError(f"{path.name}: {table}: a count group's facts each give their own where")
    return {
        "kind": kind, "table": table,
        "keys": tuple(_declared(path, table, k, RUN_COLUMN if kind == "count" else IDENTIFIER, "key")
                      for k in keys),
        "where": tuple((_declared(path, table, c, IDENTIFIER, "filter column"),
                        _declared(path, table, v, LITERAL, "filter value"))
                       for c, v in (raw.get("where") or {}).items()),
        "order": tuple(_declared(path, table, o, ORDER, "order") for o in raw.get("order") or ()),
    }


@lru_cache(maxsize=8)
def column_facts(path: Path) -> dict[str, DeclaredFact]:
    """The facts declared in `path` (a columns.yaml), by name; none when there is no such file."""
    if not path.is_file():
        return {}
    try:
        groups = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise FactError(f"{path.name}: not valid YAML ({exc})".splitlines()[0]) from None
    if not isinstance(groups, list):
        raise FactError(f"{path.name}: expected a list of tables with their facts")
    out: dict[str, DeclaredFact] = {}
    changes = []   # read once the facts they compare are
    for raw in groups:
        group = _group(path, raw)
        for name, entry in (raw.get("facts") or {}).items():
            name = _declared(path, "fact", name, NAME, "name")
            if name in out or name in dict(changes):
                raise FactError(f"{path.name}: fact {name!r} declared twice")
            if group["kind"] == "change":
                changes.append((name, (group["by"], entry)))
            else:
                out[name] = (_count_fact if group["kind"] == "count" else _column_fact)(
                    path, group, name, entry)
    for name, (by, entry) in changes:
        out[name] = _change_fact(path, by, name, entry, out)
    return out

"""Facts declared in the facts folder's columns.yaml instead of written as SQL: the kinds of
declaration and the query each one generates (declared_file.py reads and checks the file)."""
from __future__ import annotations

import re
from dataclasses import dataclass

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
    note: str | None = None         # a column whose text, where not null, is said beside the line
    line_at: str | None = None      # the column of the value's own line in <line>_file, where a
                                    # record spans lines (a pretty-printed result file)

    def columns(self) -> set[str]:
        """The table's columns the query names."""
        named = {m for m in EXPRESSION_TOKEN.findall(self.value) if m} - EXPRESSION_FUNCTIONS
        lines = {f"{self.line}_file", self.line_at or f"{self.line}_line"} if self.line else set()
        when = {self.no_line_when[0]} if self.no_line_when else set()
        note = {self.note} if self.note else set()
        return named | set(self.keys) | {c for c, _ in self.where} | \
            {o.split()[0] for o in self.order} | lines | when | note

    def named_columns(self) -> dict[str, set[str]]:
        """The columns the query names, by table."""
        return {self.table: self.columns()}

    def _filters(self) -> list[str]:
        """The fixed conditions: the declared `where`, and with `order` a first column not null."""
        fixed = [f"{c} = '{v}'" for c, v in self.where]
        return fixed + ([f"{self.order[0].split()[0]} is not null"] if self.order else [])

    def _final(self) -> str:
        """The select list of the final query over `source` (value, display, unit, run_id,
        source_note, source_file, source_line)."""
        shown = self.value if IDENTIFIER.fullmatch(self.value) else f"({self.value})"
        display = f"        {DISPLAYS[self.display].format(v=shown)} as display,\n" \
            if self.display else ""
        run_id = "run_id" if "run_id" in self.keys else "cast(null as varchar)"
        column, notes = self.no_line_when or ("", ())
        cases = "".join(f"when {column} = '{v}' then '{n}' " for v, n in notes)
        text = f"case {cases}else '{self.no_line}' end" if notes else f"'{self.no_line}'"
        said = (None if self.no_line is None else text if self.line is None
                else f"case when {self.line}_file is null then {text} end")
        if self.note:
            said = f"nullif(concat_ws(' ', {said}, {self.note}), '')" if said else self.note
        note = "" if said is None else f"        {said} as source_note,\n"
        source = (("cast(null as varchar)", "cast(null as integer)") if self.line is None
                  else (f"{self.line}_file", self.line_at or f"{self.line}_line"))
        return (
            f"        {self.value} as value,\n"
            f"{display}"
            f"        {unit_sql(self.unit)} as unit,\n"
            f"        {run_id} as run_id,\n"
            f"{note}"
            f"        {source[0]} as source_file,\n"
            f"        {source[1]} as source_line\n")

    def sql(self) -> str:
        """The query, in the shape of a fact's SQL file."""
        conditions = [f"{k} = ${k}" for k in self.keys] + self._filters()
        ordered = f"    order by {', '.join(self.order)}\n    limit 1\n" if self.order else ""
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
            f"{self._final()}"
            "    from source\n"
            ")\n"
            "\n"
            "select * from final\n")

    def key_sets_sql(self) -> str:
        """The parameter sets the table holds rows for: its distinct keys (batch_sql's input when
        every printed set of the fact is wanted at once)."""
        filters = " and ".join(self._filters()) or "true"
        return f"select distinct {', '.join(self.keys)} from {self.table} where {filters}\n"

    def batch_sql(self) -> str:
        """sql() for many parameter sets at once: each key is bound as a list (`$run_id`, ...), the
        lists zipped into numbered sets, and each row comes with its set's number, BATCH_INDEX.
        With `order`, a set keeps the rows that rank first (several when tied: not settled)."""
        if not self.keys:
            raise ValueError(f"{self.name}: a fact without keys has one parameter set")
        keys = ",\n".join(f"        unnest(${k}) as {BATCH_KEY}{i}" for i, k in enumerate(self.keys))
        joined = " and ".join(f"t.{k} = keys.{BATCH_KEY}{i}" for i, k in enumerate(self.keys))
        ranked = (f"    qualify rank() over (partition by keys.{BATCH_INDEX}\n"
                  f"        order by {', '.join(f't.{o}' for o in self.order)}) = 1\n"
                  if self.order else "")
        filters = " and ".join(self._filters()) or "true"
        return (
            f"-- {self.description} (many parameter sets)\n"
            "with keys as (\n"
            "    select\n"
            f"        unnest(range(len(${self.keys[0]}))) as {BATCH_INDEX},\n"
            f"{keys}\n"
            "),\n"
            "\n"
            "source as (\n"
            f"    select keys.{BATCH_INDEX}, t.*\n"
            "    from keys\n"
            f"    inner join {self.table} as t on {joined}\n"
            f"    where {filters}\n"
            f"{ranked}"
            "),\n"
            "\n"
            "final as (\n"
            "    select\n"
            f"        {BATCH_INDEX},\n"
            f"{self._final()}"
            "    from source\n"
            ")\n"
            "\n"
            "select * from final\n")


BATCH_INDEX = "batch_set__"   # batch_sql's column numbering the parameter sets
BATCH_KEY = "batch_key__"     # batch_sql's key columns: batch_key__0, batch_key__1, ...


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

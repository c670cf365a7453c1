"""Facts: every number an article prints, with the query and the raw line it came from.

A template asks for a number by name, `{{ fact("launch_ready_s", run_id=r) }}`. The name is a query
with `$name` bound parameters: `stages/render/sql/facts/<name>.sql`, or, for a fact that prints one column
of one row of a public table or counts its rows, an entry of `stages/render/sql/facts/columns.yaml` whose
query is generated (see ColumnFact, CountFact). The query returns one row with columns value,
run_id, source_file, source_line (and optionally unit, display: the printed form of the value
when the query knows it better, e.g. 4 GiB for a size in bytes, and source_note: why no raw line
holds the value, when none does, or what to know of the line it cites). The value is formatted, linked to its audit
page and recorded. Tables whose numeric cells are facts, evidence blocks (a command run on a raw
file at build time) and run references work the same way.

The macros a template calls are page_macros.py's. The queries are found by queries.py, raw files
read by evidence.py; the Fact record is fact_record.py's.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb

from stages.core.secrets import redact_text, redact_value
from stages.render import row_batch
from stages.render.declared import ColumnFact
from stages.render.errors import FactError
from stages.render.evidence import read_line
from stages.render.fact_record import Fact, fact_id, plain, run_ids
from stages.render.inputs import input_rows, prefetch as prefetch_inputs
from stages.render.marks import FactMarks
from stages.render.numbers import format_value
from stages.render.shown import shown_rows
from stages.render.queries import (COLUMN_FACTS, FACTS_SQL, ROWS_SQL, column_facts, fact_sql,
                                   load_query, sql_params)
from stages.render.timing import Phases

STAGE = "derive"  # the stage whose tables the fact queries read
REQUIRED_COLUMNS = ("value", "run_id", "source_file", "source_line")
MACROS_SQL = "macros.sql"   # table macros the row queries share, beside the rows folder


# ---------------------------------------------------------------- the fact book

def _one_row_each(columns: list[str], rows: list[tuple], ids: list[str]
                  ) -> dict[str, tuple[list[str], tuple]]:
    """A batch query's answer by fact id (`ids`, one per set asked, in order): the columns and the
    one row of each set that has exactly one (a fact is one row; other sets are left out)."""
    return {fid: (columns[1:], found[0])
            for fid, found in zip(ids, row_batch.rows_by_set(rows, len(ids))) if len(found) == 1}


class FactBook:
    """Evaluates named queries against campaign.duckdb and keeps every fact it printed."""

    def __init__(self, con: duckdb.DuckDBPyConnection, *, root: Path, sha: str | None,
                 facts_sql: Path = FACTS_SQL, rows_sql: Path = ROWS_SQL,
                 raw_dirs: tuple[Path, ...] | None = None, phases: Phases | None = None,
                 memo: Any = None):
        self.con = con
        self.memo = memo     # a query_memo.QueryMemo: answers kept from the renders of this database
        self.phases = phases or Phases()   # where the time goes (stages/render/timing.py)
        self.root = root
        self.raw_dirs = tuple(d for d in raw_dirs or () if d is not None) or (root,)
        self.sha = sha
        self.facts_sql = facts_sql
        self.rows_sql = rows_sql
        self.facts: dict[str, Fact] = {}
        self.touched: dict[str, list[str]] = {}   # each page's facts, in the order it printed them
        self._table_columns: dict[str, set[str]] = {}
        self._sql: dict[str, str] = {}     # fact queries found, by name
        self._excerpts: dict[tuple[str, int], str] = {}   # raw lines read, by (file, line)
        self._inputs: dict = {}    # inputs queries run (inputs.input_rows)
        self._rows: dict[str, tuple[list[str], list[tuple]]] = {}   # row queries run, by name and params
        self._sections: list[tuple[tuple[str, ...], str]] = []      # expect_sections
        self._batch_sets: dict[str, list[dict[str, Any]]] = {}       # _batched's parameter sets
        # a declared fact's rows for every parameter set its table holds, by fact id (_batched)
        self._batches: dict[str, dict[str, tuple[list[str], tuple]] | None] = {}
        # each fact's caveat marks, from the public tables read once (stages/render/marks.py)
        self.marks = FactMarks(lambda sql: self._query(sql, {}, "fact marks"), facts_sql=facts_sql)
        macros = rows_sql.parent / MACROS_SQL
        if macros.is_file():
            con.execute(macros.read_text())

    def fact_sql(self, name: str) -> str:
        """Fact `name`'s query (found once per book), checked against the tables' columns."""
        if name not in self._sql:
            declared = column_facts(self.facts_sql / COLUMN_FACTS).get(name)
            for table, named in (declared.named_columns() if declared else {}).items():
                lacking = sorted(named - self._columns(table))
                if lacking:
                    raise FactError(f"fact {name!r}: {table} has no column(s) {', '.join(lacking)}")
            self._sql[name] = fact_sql(name, self.facts_sql)
        return self._sql[name]

    def _columns(self, table: str) -> set[str]:
        """The columns of a public table in the campaign database (looked up once)."""
        if table not in self._table_columns:
            rows = self.con.execute(
                "select column_name from information_schema.columns where table_name = $t",
                {"t": table}).fetchall()
            self._table_columns[table] = {r[0] for r in rows}
        return self._table_columns[table]

    def evaluate(self, name: str, params: dict[str, Any], page: str | None = None,
                 decimals: int | None = None) -> Fact:
        sql = self.fact_sql(name)
        wanted = sql_params(sql)
        missing = [p for p in wanted if p not in params]
        extra = [p for p in params if p not in wanted]
        if missing or extra:
            raise FactError(f"fact {name!r} binds {wanted or 'nothing'}; got {sorted(params)}")
        params = {k: plain(params[k]) for k in wanted}
        fid = fact_id(name, params)
        if fid in self.facts:
            fact = self.facts[fid]
        else:
            batch = self._batched(name)
            if batch and fid in batch:
                columns, row = batch[fid]
                fact = self._fact(fid, name, sql, params, dict(zip(columns, row)))
            else:   # not settled by the batch: the fact's own query, which says why
                fact = self._compute(fid, name, sql, params)
            self.facts[fid] = fact
        self.printed_on(fact, page)
        return fact.at_decimals(decimals)

    def printed_on(self, fact: Fact, page: str | None) -> None:
        """Note that `page` prints `fact`; `touched[page]` keeps the page's facts in order."""
        if page and page not in fact.pages:
            fact.pages.append(page)
            self.touched.setdefault(page, []).append(fact.id)

    def _query(self, sql: str, params: dict[str, Any], what: str,
               remember: bool = True) -> tuple[list[str], list[tuple]]:
        """The columns and rows of `sql` with `params` bound, kept in the memo (where there is one)
        when `remember`; a failure is a FactError about `what`. A text longer than a page shows
        comes shortened, with a note of what it left out (stages/render/shown.py): these rows are
        only ever shown (pages, tables, charts); the database keeps the text whole."""
        if remember and self.memo is not None:
            kept = self.memo.get(sql, params)
            if kept is not None:
                return kept
        try:
            with self.phases("queries"):
                cur = self.con.execute(sql, params) if params else self.con.execute(sql)
                rows = shown_rows(cur.description, cur.fetchall())
        except duckdb.Error as exc:
            raise FactError(f"{what}: {exc}".splitlines()[0]) from None
        answer = [d[0] for d in cur.description], rows
        if remember and self.memo is not None:
            self.memo.put(sql, params, answer)
        return answer

    def _compute(self, fid: str, name: str, sql: str, params: dict[str, Any]) -> Fact:
        columns, rows = self._query(sql, params, f"fact {name!r}: query failed")
        lacking = [c for c in REQUIRED_COLUMNS if c not in columns]
        if lacking:
            raise FactError(f"fact {name!r}: query lacks columns {', '.join(lacking)}")
        if len(rows) != 1:
            raise FactError(f"fact {name!r} with {params}: {len(rows)} rows, expected one")
        return self._fact(fid, name, sql, params, dict(zip(columns, rows[0])))

    def prefetch(self, name: str, param_sets: Iterable[dict[str, Any]]) -> int:
        """Evaluates fact `name` for the parameter sets (rows holding them, other columns ignored)
        that its batch settles (a declared fact's _batched, else its query's _batched_query), and
        keeps the facts; returns how many were new. A set the batch does not settle is left to
        evaluate(), which says why."""
        try:
            sql = self.fact_sql(name)
        except FactError:      # evaluate() says why
            return 0
        wanted = sql_params(sql)
        todo: dict[str, dict[str, Any]] = {}     # the sets not evaluated yet, by fact id
        for params in param_sets:
            if set(wanted) <= set(params):
                bound = {k: plain(params[k]) for k in wanted}
                fid = fact_id(name, bound)
                if fid not in self.facts:
                    todo.setdefault(fid, bound)
        batch = self._batched(name) or self._batched_query(name, sql, todo)
        made = 0
        for fid, bound in todo.items():
            if fid in batch:     # as evaluate() makes it from a batch
                columns, row = batch[fid]
                self.facts[fid] = self._fact(fid, name, sql, bound, dict(zip(columns, row)))
                made += 1
        return made

    def _batched(self, name: str) -> dict[str, tuple[list[str], tuple]] | None:
        """A declared one-column fact's one row for every parameter set its table holds, by fact
        id: two queries a render (its key sets, then ColumnFact.batch_sql), sets of several rows
        left out. None without a batch form or when it fails (evaluate() then goes one by one)."""
        if name in self._batches:
            return self._batches[name]
        self._batches[name] = None
        declared = column_facts(self.facts_sql / COLUMN_FACTS).get(name)
        if not isinstance(declared, ColumnFact) or not declared.keys:
            return None
        try:
            wanted = sql_params(self.fact_sql(name))
            if set(declared.keys) != set(wanted):
                return None
            _, key_rows = self._query(declared.key_sets_sql(), {}, f"fact {name!r}: key sets")
            sets = [dict(zip(declared.keys, r)) for r in key_rows]
            if not sets:
                return None
            columns, rows = self._query(declared.batch_sql(), {k: [s[k] for s in sets] for k in wanted},
                                        f"fact {name!r}: batch query failed")
        except FactError:
            return None
        self._batch_sets[name] = [{k: plain(s[k]) for k in wanted} for s in sets]
        self._batches[name] = _one_row_each(columns, rows, [fact_id(name, s) for s in self._batch_sets[name]])
        return self._batches[name]

    def _batched_query(self, name: str, sql: str, todo: dict[str, dict[str, Any]]
                       ) -> dict[str, tuple[list[str], tuple]]:
        """Fact query `sql`'s one row for each parameter set of `todo` (by fact id), in one query
        (its batch form, row_batch.batch_sql, bound by the fact's own parameters); sets of other
        than one row left out. Empty when the query has no batch form or the batch fails."""
        wanted = tuple(sorted(sql_params(sql)))
        batch = row_batch.batch_sql(sql, wanted) if wanted else None
        if batch is None or len(todo) < 2:
            return {}
        try:
            columns, rows = self._query(batch, row_batch.batch_params(list(todo.values()), wanted),
                                        f"fact {name!r}: batch query failed")
        except FactError:
            return {}
        if any(c not in columns for c in REQUIRED_COLUMNS):
            return {}
        return _one_row_each(columns, rows, list(todo))

    def _excerpt(self, source_file: str, source_line: int) -> str:
        """The raw line a fact cites (evidence.read_line), read once per file and line."""
        key = (source_file, source_line)
        if key not in self._excerpts:
            with self.phases("raw lines"):
                self._excerpts[key] = read_line(self.root, source_file, source_line, self.raw_dirs)
        return self._excerpts[key]

    def _fact(self, fid: str, name: str, sql: str, params: dict[str, Any], row: dict[str, Any]) -> Fact:
        """The Fact of query `sql`'s one row with `params`."""
        source_file, source_line = row["source_file"], row["source_line"]
        excerpt = self._excerpt(source_file, int(source_line)) if source_file else None
        value = redact_value(plain(row["value"]))
        display = row.get("display")
        with self.phases("inputs"):
            if name in self._batch_sets:     # the inputs of its batch's facts, in one query
                sets, runs = self._batch_sets.pop(name), {r for ids, _ in self._sections for r in ids}
                prefetch_inputs(self.con, name, [s for s in sets if not runs or s.get("run_id") in runs],
                                self._inputs)
            statistic, rows = input_rows(self.con, name, params, cache=self._inputs)
        return Fact(
            id=fid, name=name, params={k: redact_value(v) for k, v in params.items()}, value=value,
            unit=row.get("unit"),
            display=redact_text(format_value(value) if display is None else str(display)), sql=sql,
            run_ids=run_ids(row["run_id"]),
            source_file=source_file, source_line=int(source_line) if source_line else None,
            excerpt=excerpt, stage=STAGE, git_sha=self.sha,
            source_note=row.get("source_note"),
            statistic=statistic, input_rows=rows, marks=self.marks.of(name, params))

    def rows(self, name: str, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """A named row query (stages/render/sql/render/<name>.sql): the SQL and its rows as dicts,
        run once per set of parameters (a Part asks for some twice)."""
        sql = load_query(self.rows_sql, name, "row query")
        wanted = sql_params(sql)
        missing = [p for p in wanted if p not in params]
        if missing:
            raise FactError(f"row query {name!r} needs {', '.join(missing)}")
        bound = {k: params[k] for k in wanted}
        key = _row_key(name, bound)
        if key not in self._rows and set(wanted) == row_batch.BATCH_PARAMS:
            self._batch_rows(name, sql, (tuple(bound["run_ids"] or ()), bound["model"]))
        if key not in self._rows:
            self._rows[key] = self._query(sql, bound, f"row query {name!r}")
        columns, data = self._rows[key]
        return sql, [dict(zip(columns, r)) for r in data]

    def expect_sections(self, sections: Iterable[tuple[Iterable[str], str]]) -> None:
        """The model sections ((run_ids, model)) the pages about to render will draw: a section
        row query asked for one of them runs once for all (stages/render/row_batch.py)."""
        self._sections = list(dict.fromkeys((tuple(r), m) for r, m in sections))

    def _batch_rows(self, name: str, sql: str, section: tuple[tuple[str, ...], str]) -> None:
        """Row query `name` for every expected section it has not run for, when `section` is one
        of them; left to rows() one by one when it has no batch form or the batch fails."""
        def bound(s):     # the parameters the section would be asked with alone (rows())
            return {"run_ids": list(s[0]), "model": s[1]}
        todo = [s for s in self._sections if _row_key(name, bound(s)) not in self._rows]
        for s in list(todo) if self.memo is not None else ():
            kept = self.memo.get(sql, bound(s))      # kept section by section (query_memo.py)
            if kept is not None:
                self._rows[_row_key(name, bound(s))] = kept
                todo.remove(s)
        batch = row_batch.batch_sql(sql)
        if section not in todo or batch is None:
            return
        try:
            columns, data = self._query(batch, row_batch.section_params(todo), f"row query {name!r}",
                                        remember=False)
        except FactError:
            return
        found = row_batch.rows_by_set(data, len(todo))
        for i, s in enumerate(todo):
            self._rows[_row_key(name, bound(s))] = (columns[1:], found[i])
            if self.memo is not None:
                self.memo.put(sql, bound(s), (columns[1:], found[i]))

    def records(self) -> list[dict[str, Any]]:
        return [f.record() for f in sorted(self.facts.values(), key=lambda f: f.id)]


def _row_key(name: str, bound: dict[str, Any]) -> str:
    """Where FactBook keeps row query `name`'s rows for the parameters `bound`."""
    return repr((name, sorted(bound.items())))

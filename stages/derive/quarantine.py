"""Data tests and the quarantine: a row of a public table that breaks one of its invariants
(stages/derive/sql/marts/schema.yaml) is moved into the public `quarantine` table with the test and
the offending values, and derive goes on with the rest.

Order: each check runs as soon as its table and every mart the check reads are built, so a row is
held back before the marts built from its table read it (a check that reads a mart built later
runs once that one is built). When every model is built, all checks run again, and again, until a
round holds nothing back: a row left pointing at a held-back one breaks a check of its own table
(`..._belongs_to_a_...`, `point_exists`) and is held back in turn, so no dangling row is published.
Strict mode (`campaign derive --strict`, the test suite) holds nothing back: the first check that
fails raises DataTestError, one line per offending row.

A check's offending rows are matched to the rows of its table on the columns they share by name
(the key columns, for a `unique` check). A failure that matches no row of the table (an invariant
over many rows) is recorded in the quarantine with its offending values, and nothing is held back.

Example:
    from stages.derive import quarantine
    tester = quarantine.Tester(con, schema, values, marts=models.marts, strict=False)
    tester.built("runs")           # after each model is built
    tester.settle()                # when all are
"""
from __future__ import annotations

from typing import Any

import duckdb

from stages.core.config import CampaignError
from stages.core.catalogue import reads

QUARANTINE = "quarantine"        # the public table of held-back rows (schema.yaml)
MAX_ROUNDS = 20                  # re-test rounds before derive gives up on settling


class DataTestError(CampaignError):
    """A public table broke one of its invariants (schema.yaml)."""


def row_text(columns: list[str], row: tuple) -> str:
    return ", ".join(f"{c}={v!r}" for c, v in zip(columns, row))


def columns_of(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [r[0] for r in con.execute(
        "select column_name from duckdb_columns() where database_name = current_database() "
        "and table_name = $t order by column_index", {"t": table}).fetchall()]


def table_tests(table: str, spec: dict[str, Any], columns: list[str]) -> list[tuple[str, str]]:
    """(check name, SQL returning offending rows) for one table's invariants."""
    tests: list[tuple[str, str]] = []
    unique = list(spec.get("unique") or [])
    not_null = list(spec.get("not_null") or [])
    unknown = [c for c in (*unique, *not_null) if c not in columns]
    if unknown:
        raise CampaignError(f"schema.yaml: {table} has no column(s) {', '.join(unknown)}")
    if unique:
        keys = ", ".join(unique)
        tests.append((f"unique({keys})",
                      f"select {keys}, count(*) as rows from {table} group by {keys} having count(*) > 1"))
    for col in not_null:
        tests.append((f"not_null({col})", f"select * from {table} where {col} is null"))
    for name, sql in (spec.get("checks") or {}).items():
        tests.append((str(name), str(sql).strip().rstrip(";")))
    return tests


class Tester:
    """Runs the invariants of `schema` as the marts are built and holds back what breaks them."""

    def __init__(self, con: duckdb.DuckDBPyConnection, schema: dict[str, dict[str, Any]],
                 values: dict[str, Any], *, marts: tuple[str, ...], strict: bool, bind) -> None:
        self.con, self.schema, self.values, self.bind = con, schema, values, bind
        self.marts = set(marts)
        self.done: set[str] = set()
        self.pending: list[tuple[str, str, str, set[str]]] = []
        self.checks_run = 0
        self.holds = QUARANTINE in schema and not strict
        self.held = 0
        self.noted: set[tuple[str, str, str]] = set()

    def built(self, name: str) -> None:
        """Note a model built; run every check whose table and reads are now all built."""
        self.done.add(name)
        if name in self.schema and name != QUARANTINE:
            for test, sql in table_tests(name, self.schema[name], columns_of(self.con, name)):
                self.pending.append((name, test, sql, reads(sql, self.marts) | {name}))
        ready = [p for p in self.pending if p[3] <= self.done]
        self.pending = [p for p in self.pending if not p[3] <= self.done]
        for table, test, sql, _ in ready:
            self.check(table, test, sql)

    def settle(self) -> int:
        """Re-run every check until a round holds nothing back; then the quarantine's own.
        Returns the number of checks run."""
        for table, test, sql, _ in self.pending:      # reads a mart that was never built
            self.check(table, test, sql)
        self.pending = []
        every = [(t, n, s) for t in self.schema if t != QUARANTINE
                 for n, s in table_tests(t, self.schema[t], columns_of(self.con, t))]
        if self.held:                # else every check ran on its table as it is published
            for _ in range(MAX_ROUNDS):
                if not sum(self.check(*c) for c in every):
                    break
            else:
                raise DataTestError(f"data tests still hold rows back after {MAX_ROUNDS} rounds")
        if QUARANTINE in self.schema:
            holds, self.holds = self.holds, False
            for test, sql in table_tests(QUARANTINE, self.schema[QUARANTINE],
                                         columns_of(self.con, QUARANTINE)):
                self.check(QUARANTINE, test, sql)
            self.holds = holds
        return self.checks_run

    def check(self, table: str, test: str, sql: str) -> int:
        """Run one check; hold back the rows it finds (or raise). Returns rows held back."""
        params = self.bind(sql, self.values)
        try:
            cur = self.con.execute(f"select * from ({sql}) as offending", params)
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0]
            raise CampaignError(f"data test {table}.{test} could not run: {first}") from None
        self.checks_run += 1
        found = cur.fetchall()
        if not found:
            return 0
        names = [d[0] for d in cur.description]
        lines = dict.fromkeys(f"data test failed: {table}.{test}: {row_text(names, r)}" for r in found)
        if not self.holds:
            raise DataTestError("\n".join(lines))
        return self.hold(table, test, sql, params, names)

    def note(self, table: str, test: str, sql: str, params: dict[str, Any]) -> int:
        """A failure that names no row of its table (an invariant over many rows, such as one
        latest attempt per spec): recorded once per offending row, nothing held back."""
        cur = self.con.execute(f"select * from ({sql}) as offending", params)
        names = [d[0] for d in cur.description]
        for values in cur.fetchall():
            text = row_text(names, values)
            if (table, test, text) in self.noted:
                continue
            self.noted.add((table, test, text))
            self.con.execute(
                "insert into quarantine (table_name, test, row_key, reason) values ($1, $2, $3, $4)",
                [table, test, text, f"{test}: {text} (no single row of {table} breaks it; "
                                    "nothing is held back)"])
        return 0

    def hold(self, table: str, test: str, sql: str, params: dict[str, Any], names: list[str]) -> int:
        """Move the rows of `table` the check's offending rows name into the quarantine."""
        columns = columns_of(self.con, table)
        shared = [c for c in names if c in columns]
        on = " and ".join(f"t.{c} is not distinct from o.{c}" for c in shared)
        hits = self.con.execute(
            f"select t.rowid, o.* from {table} as t join ({sql}) as o on {on}", params
        ).fetchall() if shared else []
        if not hits:
            return self.note(table, test, sql, params)
        reasons: dict[int, str] = {}
        for rowid, *values in hits:
            reasons.setdefault(rowid, f"{test}: {row_text(names, tuple(values))}")
        keys = list(self.schema[table].get("unique") or []) or shared
        extra = [c if c in columns else f"null as {c}"
                 for c in ("run_id", "node_id", "source_file", "source_line")]
        rows = self.con.execute(
            f"select rowid, {', '.join(extra)}, {', '.join(keys)} from {table} "
            f"where rowid in (select unnest($ids::bigint[]))", {"ids": list(reasons)}).fetchall()
        self.con.executemany(
            "insert into quarantine (table_name, test, run_id, node_id, row_key, source_file, "
            "source_line, reason) values ($1, $2, $3, $4, $5, $6, $7, $8)",
            [(table, test, None if run_id is None else str(run_id),
              None if node_id is None else str(node_id),
              ", ".join(f"{k}={v}" for k, v in zip(keys, key)),
              None if source_file is None else str(source_file), source_line, reasons[rowid])
             for rowid, run_id, node_id, source_file, source_line, *key in rows])
        self.con.execute(f"delete from {table} where rowid in (select unnest($ids::bigint[]))",
                         {"ids": list(reasons)})
        self.held += len(rows)
        return len(rows)

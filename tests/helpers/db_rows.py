"""The rows of a query as dicts (column name to value), from a connection or a database file;
or as tuples from a database file."""
from __future__ import annotations

from pathlib import Path

import duckdb


def rows_of(con: duckdb.DuckDBPyConnection, sql: str, params: dict | list | None = None) -> list[dict]:
    cur = con.execute(sql, params) if params else con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def db_rows(db: Path, sql: str, params: dict | list | None = None) -> list[dict]:
    """rows_of a database file, opened read-only for the query."""
    with duckdb.connect(str(db), read_only=True) as con:
        return rows_of(con, sql, params)


def db_tuples(db: Path, sql: str, params: dict | list | None = None) -> list[tuple]:
    """The rows of a query as tuples, from a database file opened read-only for the query."""
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()

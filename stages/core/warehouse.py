"""The warehouse (DuckDB) helpers the stages share: paths relative to the project, raw values
as text, the columns of every table, rows as typed frames, and the entries of a data folder.
The raw tables themselves are declared in sql/schema/raw.sql (stages/core/raw_schema.py)."""
from __future__ import annotations

import functools
import json
import os
import stat
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from stages.core import rawfile

COLUMNS_SQL = Path(__file__).parent / "sql" / "columns.sql"


@functools.cache
def _columns_sql() -> str:
    """columns.sql, read once per process."""
    return COLUMNS_SQL.read_text()


def relative(path: Path, root: Path) -> str:
    """`path` relative to `root`, forward slashes; links are not followed (DVC may link files)."""
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(root))).as_posix()


def text_value(value: Any) -> str | None:
    """A raw value as text: strings as they are, anything else as JSON."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def table_columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    """Column names and types of every table in the database, in table order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, dtype in con.execute(_columns_sql()).fetchall():
        out.setdefault(table, []).append((column, dtype))
    return out


def typed_frame(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> pd.DataFrame:
    """Rows as a frame with exactly the table's columns, typed so that nulls stay nulls."""
    data = {}
    for name, dtype in columns:
        values = [r.get(name) for r in rows]
        if dtype in ("INTEGER", "BIGINT"):
            data[name] = pd.array(values, dtype="Int64")
        elif dtype == "DOUBLE":
            data[name] = pd.array(values, dtype="Float64")
        elif dtype == "BOOLEAN":
            data[name] = pd.array(values, dtype="boolean")
        elif dtype.startswith("TIMESTAMP"):
            data[name] = pd.to_datetime(pd.Series(values, dtype=object), utc=True)
        else:
            data[name] = pd.Series(values, dtype=object)
    return pd.DataFrame(data)


def folder_entries(parent: Path) -> list[tuple[Path, str | None]]:
    """Each entry under parent that is a folder or a link (hidden ones left out), sorted, with
    why it is not read as a folder (a link is not followed), or None."""
    if not parent.is_dir():
        return []
    out = []
    with os.scandir(parent) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                out.append((Path(entry.path), rawfile.kind_of(stat.S_IFLNK)))
            elif entry.is_dir(follow_symlinks=False):
                out.append((Path(entry.path), None))
    return sorted(out)

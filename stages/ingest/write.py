"""Writing to the warehouse: the raw tables made to match raw.sql (raw_seals kept across a
rebuild), the rows of whole folders replaced in one transaction per batch as few large frames,
a tampered folder's stored rows kept, and the refused entries of the runs folder recorded.
"""
from __future__ import annotations

import functools
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from stages.core.warehouse import relative, table_columns, typed_frame
from stages.ingest.rows import KEPT_TABLES, RAW_TABLES, ROW_TABLES, SCHEMA_SQL, FolderRows, redact

SQL_DIR = Path(__file__).parent / "sql"
INGEST_SQL = SQL_DIR / "ingest"
WRITER_MEMORY = "512MB"        # DuckDB's buffer limit while writing (it spills beyond)
# One DuckDB thread writes: the frames are loaded while the reader processes keep the cores busy,
# and a second thread costs more CPU than it saves time.
WRITER_THREADS = 1
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


@functools.cache
def ingest_sql(name: str) -> str:
    """An ingest SQL file, read once per process (the write path runs some for every folder)."""
    return (INGEST_SQL / name).read_text()


def _statements(sql: str) -> list[str]:
    body = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def _execute(con: duckdb.DuckDBPyConnection, name: str, values: dict[str, Any]) -> None:
    """Run each statement of an ingest SQL file with the values it names."""
    for statement in _statements(ingest_sql(name)):
        con.execute(statement, {k: values[k] for k in set(_PARAM.findall(statement))})


def raw_columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    """The columns (name, type) of the raw tables in the warehouse, by table."""
    return {t: cols for t, cols in table_columns(con).items() if t in RAW_TABLES}


def open_warehouse(warehouse: Path) -> tuple[duckdb.DuckDBPyConnection, bool]:
    """Connect and make the raw tables match raw.sql; True when they had to be rebuilt. The
    tables of KEPT_TABLES are never dropped: see keep_seals."""
    schema = SCHEMA_SQL.read_text()
    expected = duckdb.connect()
    expected.execute(schema)
    want_all = table_columns(expected)
    expected.close()
    want = {t: cols for t, cols in want_all.items() if t in RAW_TABLES}
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(warehouse),
                         config={"memory_limit": WRITER_MEMORY, "threads": WRITER_THREADS})
    have_all = table_columns(con)
    have = {t: cols for t, cols in have_all.items() if t in RAW_TABLES}
    rebuilt = False
    if have and have != want:
        for table in RAW_TABLES:
            con.execute(f"drop table if exists {table}")
        rebuilt = True
    keep_seals(con, schema, have_all, want_all)
    return con, rebuilt


def keep_seals(con: duckdb.DuckDBPyConnection, schema: str, have: dict[str, list[tuple[str, str]]],
               want: dict[str, list[tuple[str, str]]]) -> None:
    """Create the tables of raw.sql, and re-create a kept table (raw_seals) whose columns changed
    there with its old rows copied in (the columns both versions have), so that a change of
    raw.sql never forgets the manifest hashes taken at first ingest. A column added to a kept
    table must allow nulls or have a default."""
    changed = [t for t in KEPT_TABLES if t in have and have[t] != want[t]]
    con.execute("begin transaction")
    try:
        for table in changed:
            con.execute(f"alter table {table} rename to {table}_previous")  # identifier from KEPT_TABLES
        con.execute(schema)
        for table in changed:
            old = {name for name, _ in have[table]}
            common = ", ".join(name for name, _ in want[table] if name in old)
            con.execute(f"insert into {table} ({common}) select {common} from {table}_previous")
            con.execute(f"drop table {table}_previous")
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise


def _table_frames(table: str, batch: list[FolderRows], columns: list[tuple[str, str]]
                  ) -> list[pd.DataFrame]:
    """The rows of `table` from every folder of `batch`, as few frames as possible."""
    frames = []
    rows = [row for folder in batch for row in folder.tables[table]]
    if rows:
        frames.append(typed_frame(rows, columns))
    shapes: dict[tuple[str, ...], list[tuple[str, str, dict[str, Any]]]] = {}
    for folder in batch:
        for source, block in folder.blocks.get(table, ()):
            shapes.setdefault(tuple(block), []).append((folder.run_id, source, block))
    for names, blocks in shapes.items():
        frames.append(_blocks_frame(names, blocks))
    return frames


def _blocks_frame(names: tuple[str, ...], blocks: list[tuple[str, str, dict[str, Any]]]) -> pd.DataFrame:
    """Blocks with the same columns as one frame. A column given as one value (a string) holds
    it on every row of its block; such columns, and the text columns of stats blocks, become
    categoricals, cheap to build and to load."""
    sizes = np.array([len(b["source_line"]) for _, _, b in blocks], dtype=np.int64)
    data: dict[str, Any] = {
        "run_id": _repeat([run_id for run_id, _, _ in blocks], sizes),
        "source_file": _repeat([source for _, source, _ in blocks], sizes),
    }
    for name in names:
        values = [b[name] for _, _, b in blocks]
        if isinstance(values[0], str):
            data[name] = _repeat(values, sizes)
        elif isinstance(values[0], pd.Categorical):
            data[name] = union_categoricals(values)
        elif isinstance(values[0], np.ndarray) and values[0].dtype != object:
            data[name] = np.concatenate(values)
        else:
            data[name] = np.concatenate([np.asarray(v, dtype=object) for v in values])
    return pd.DataFrame(data)


def _repeat(values: list[str], sizes: np.ndarray) -> pd.Categorical:
    categories = sorted(set(values))
    index = {v: i for i, v in enumerate(categories)}
    codes = np.repeat(np.array([index[v] for v in values], dtype=np.int32), sizes)
    return pd.Categorical.from_codes(codes, categories=categories)


def write_folders(con: duckdb.DuckDBPyConnection, columns: dict[str, list[tuple[str, str]]],
                  batch: list[tuple[FolderRows, dict[str, Any]]], stored: set[str] | None = None
                  ) -> list[dict[str, int]]:
    """Replace the rows of each folder of `batch` in a single transaction; rows of a folder
    already in the warehouse (`stored`; None: look it up) are deleted first, except those of a
    folder found tampered (raw_tampered rows): it keeps the rows stored before, and only its
    tamper record is replaced. A folder's first ingest records its seal (`manifest_sha256`,
    `sealed_at` in its folder row). Returns rows written per table, per folder."""
    now = datetime.now(timezone.utc)
    con.execute("begin transaction")
    try:
        if stored is None:
            stored = {run_id for run_id, _ in con.execute(ingest_sql("folders.sql")).fetchall()}
        fresh, counts = [], []
        for rows, folder_row in batch:
            keep = rows.run_id in stored and bool(rows.tables["raw_tampered"])
            _stamp_tampered(con, rows, keep, now)
            if keep:
                _execute(con, "keep_tampered.sql", folder_row)
                _insert_rows(con, "raw_tampered", [rows], columns)
                counts.append({table: rows.count(table) if table == "raw_tampered" else 0
                               for table in ROW_TABLES})
            else:
                if rows.run_id in stored:
                    _execute(con, "delete_run.sql", folder_row)
                fresh.append((rows, folder_row))
                counts.append({table: rows.count(table) for table in ROW_TABLES})
        for table in ROW_TABLES:
            _insert_rows(con, table, [rows for rows, _ in fresh], columns)
        for _, folder_row in fresh:
            _execute(con, "insert_folder.sql", folder_row)
        for _, folder_row in batch:
            if folder_row.get("manifest_sha256"):
                _execute(con, "insert_seal.sql", {
                    **folder_row, "first_ingested_at": folder_row["ingested_at"],
                    "sealed_by": "ingest" if folder_row.get("sealed_at") else "run"})
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise
    return counts


def _insert_rows(con: duckdb.DuckDBPyConnection, table: str, folders: list[FolderRows],
                 columns: dict[str, list[tuple[str, str]]]) -> None:
    for frame in _table_frames(table, folders, columns[table]):
        con.register("ingest_frame", frame)
        try:
            con.execute(f"insert into {table} by name select * from ingest_frame")
        finally:
            con.unregister("ingest_frame")


def _stamp_tampered(con: duckdb.DuckDBPyConnection, rows: FolderRows, kept: bool,
                    now: datetime) -> None:
    """Complete a folder's raw_tampered rows: whether its stored rows are kept, and when each
    change was first seen (an earlier record of the same change keeps its time)."""
    if not rows.tables["raw_tampered"]:
        return
    seen = {(file, reason): at for file, reason, at in
            con.execute(ingest_sql("tampered.sql"), {"run_id": rows.run_id}).fetchall()}
    for row in rows.tables["raw_tampered"]:
        row["rows_kept"] = kept
        row["detected_at"] = seen.get((row["file"], row["reason"]), now)


def write_batch(con: duckdb.DuckDBPyConnection, columns: dict[str, list[tuple[str, str]]],
                batch: list[tuple[FolderRows, dict[str, Any]]], stored: set[str]
                ) -> list[dict[str, int]]:
    """Write a batch in one transaction; when that fails, each folder on its own, and a folder
    whose rows cannot be stored gets an ingest_errors row instead."""
    if not batch:
        return []
    try:
        return write_folders(con, columns, batch, stored)
    except duckdb.Error as exc:
        if isinstance(exc, (duckdb.IOException, duckdb.FatalException)):
            raise           # the disk failed, not the rows: stop, the transaction rolled back
        if len(batch) > 1:
            return [write_batch(con, columns, [item], stored)[0] for item in batch]
        rows, folder_row = batch[0]
        failed = FolderRows(rows.run_id)
        failed.error(folder_row["folder"], reason=f"could not store the folder's rows: {exc}"[:500])
        return write_folders(con, columns, [(failed, {**folder_row, "fingerprint": "failed"})], stored)


def remove_run(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    con.execute("begin transaction")
    try:
        _execute(con, "delete_run.sql", {"run_id": run_id})
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise


def record_refused(con: duckdb.DuckDBPyConnection, runs_dir: Path, root: Path,
                   refused: list[str]) -> None:
    """Replace the rows of the entries of runs_dir refused last time by this time's: ingest_errors
    rows with no run id, of the runs folder itself."""
    source = relative(runs_dir, root)
    rows = [{"run_id": None, "source_file": source, "source_line": None, "reason": redact(reason)}
            for reason in refused]
    con.execute("begin transaction")
    try:
        con.execute(ingest_sql("delete_refused.sql"), {"folder": source})
        if rows:
            con.register("refused_frame", typed_frame(rows, raw_columns(con)["ingest_errors"]))
            try:
                con.execute("insert into ingest_errors by name select * from refused_frame")
            finally:
                con.unregister("refused_frame")
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise


def known_folders(warehouse: Path) -> tuple[dict[str, str], bool, dict[str, str]]:
    """Fingerprints already stored, whether the raw tables had to be rebuilt first, and the
    manifest sha256 of every folder's first ingest."""
    con, rebuilt = open_warehouse(warehouse)
    try:
        return (dict(con.execute(ingest_sql("folders.sql")).fetchall()), rebuilt,
                dict(con.execute(ingest_sql("seals.sql")).fetchall()))
    finally:
        con.close()

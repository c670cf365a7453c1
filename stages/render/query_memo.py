"""Query results remembered between renders of the same campaign database.

A render after a one-template edit asks the database the questions the render before it asked:
the same SQL, the same parameters, the same database. Each answer is kept under a key of the
database's key (its bytes and the render code, SQL files included: incremental.code_version), the
query's SQL and its bound parameters, in a SQLite file in the cache folder; a render finds it there
instead of asking again. A key is never stale: another database or another query is another key.
The answers of a section batch (row_batch.py) are kept per section, as if each section had been
asked alone, so that a render drawing one Part finds the rows a render of all Parts fetched.

The file is a cache: one that cannot be read is a miss, one that cannot be written is left as it
was. A render saves its new answers in one transaction after its outputs are in place, dropping
those of any other database.

Example:
    memo = QueryMemo(cache_dir, db_key)
    found = memo.get(sql, params)        # None: not asked before
    memo.put(sql, params, (columns, rows))
    memo.save()
"""
from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path
from typing import Any

from stages.core.provenance import digest

MEMO_FILE = "query-memo.sqlite"   # in the cache folder


class QueryMemo:
    """Answers by (database key, SQL, parameters); `folder` None: nothing kept."""

    def __init__(self, folder: Path | None, db_key: str):
        self.file = Path(folder) / MEMO_FILE if folder else None
        self.db_key = db_key
        self.new: dict[str, Any] = {}
        self._con: sqlite3.Connection | None = None
        if self.file is not None and self.file.is_file():
            try:
                self._con = sqlite3.connect(f"file:{self.file}?mode=ro", uri=True, timeout=5)
            except sqlite3.Error:
                self._con = None

    def _key(self, sql: str, params: dict[str, Any]) -> str:
        return digest(self.db_key, sql, params)

    def get(self, sql: str, params: dict[str, Any]) -> Any:
        """The kept answer to `sql` with `params`, or None."""
        key = self._key(sql, params)
        if key in self.new:
            return self.new[key]
        if self._con is None:
            return None
        try:
            row = self._con.execute("select answer from answers where key = ? and db = ?",
                                    (key, self.db_key)).fetchone()
            return pickle.loads(row[0]) if row else None
        except Exception:   # another version's file, or a damaged one: ask the database
            return None

    def put(self, sql: str, params: dict[str, Any], answer: Any) -> None:
        self.new[self._key(sql, params)] = answer

    def save(self) -> None:
        """Keep this render's new answers, and drop those of other databases."""
        if self._con is not None:
            self._con.close()
            self._con = None
        if self.file is None or not self.new:
            return
        rows = [(k, self.db_key, pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)) for k, v in self.new.items()]
        self.new = {}
        for attempt in range(2):
            try:
                self._write(rows)
                return
            except sqlite3.OperationalError:   # locked, full or failing: the next render asks again
                return
            except sqlite3.DatabaseError:      # not a memo file (damaged): made again, once
                if attempt == 0:
                    self.file.unlink(missing_ok=True)
            except OSError:
                return

    def _write(self, rows: list[tuple[str, str, bytes]]) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.file, timeout=30)
        try:
            with con:
                con.execute("create table if not exists answers "
                            "(key text primary key, db text not null, answer blob not null)")
                con.execute("delete from answers where db <> ?", (self.db_key,))
                con.executemany("insert or replace into answers values (?, ?, ?)", rows)
        finally:
            con.close()

"""The outputs of a scratch project as comparable states, for the crash tests (crash.py).

A DuckDB file is compared by its tables' contents, not its bytes (two builds of the same tables
differ byte-wise); the columns that record when a row was written are left out. A folder is
compared file by file (sha256), with the parts a build stamps with its time left out. A store
written by whole-folder transactions (the warehouse) is whole when each run's rows are those of
one of the states it may be in: before the command, or after it.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import duckdb

# Columns that say when a row was written or checked: they differ between two runs of a stage.
VOLATILE = re.compile(r"(^|_)(ingested|detected|sealed|derived|rendered|built|generated|made)_at$"
                      r"|^seconds$|^elapsed_s$"
                      r"|^fingerprint$")      # of stat fields: a copy of a folder has new inodes
# Text a build stamps with its time (mkdocs' sitemap lastmod, the RSS feed's build and publication
# dates of the channel, not of its items; the build date of a page).
STAMPS = re.compile(rb"<lastmod>[^<]*</lastmod>|<lastBuildDate>[^<]*</lastBuildDate>"
                    rb"|<pubDate>[^<]*</pubDate>(?=\s*<lastBuildDate>)|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?")


def db_state(db: Path) -> dict[str, list[tuple]] | str:
    """Every table's rows, sorted, volatile columns left out; or why the file cannot be read."""
    if not db.exists():
        return "absent"
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            tables = [t for (t,) in con.execute(
                "select table_name from information_schema.tables where table_type = 'BASE TABLE' "
                "order by table_name").fetchall()]
            out = {}
            for t in tables:
                cols = [c for (c,) in con.execute(
                    "select column_name from information_schema.columns where table_name = $t "
                    "order by ordinal_position", {"t": t}).fetchall() if not VOLATILE.search(c)]
                listed = ", ".join(f'"{c}"' for c in cols)       # names the database itself gave
                rows = con.execute(f'select {listed} from "{t}"').fetchall()
                out[t] = sorted(map(repr, rows))
            return out
    except duckdb.Error as exc:
        return f"unreadable: {exc}"


def by_run(state: dict[str, list[tuple]] | str) -> dict[str, dict[str, list[str]]] | str:
    """A warehouse state split by run: run id -> table -> its rows (run_id is every raw row's
    first column); rows of no run under the key ''."""
    if isinstance(state, str):
        return state
    out: dict[str, dict[str, list[str]]] = {}
    for table, rows in state.items():
        for row in rows:
            m = re.match(r"\('([^']*)'", row)
            key = m.group(1) if m and table.startswith(("raw_", "ingest_")) else ""
            out.setdefault(key, {}).setdefault(table, []).append(row)
    return out


def tree_state(folder: Path, *, stamps: bool = False) -> dict[str, str] | str:
    """Every file under folder -> sha256 (with `stamps`, of its text with build times left out);
    links by their target; or 'absent'."""
    if not folder.exists():
        return "absent"
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = Path(dirpath) / name
            rel = p.relative_to(folder).as_posix()
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
                continue
            data = p.read_bytes()
            if stamps:
                data = STAMPS.sub(b"", data)
            out[rel] = hashlib.sha256(data).hexdigest()
    return out


def file_state(path: Path, *, stamps: bool = False) -> str:
    if not path.exists():
        return "absent"
    data = path.read_bytes()
    return hashlib.sha256(STAMPS.sub(b"", data) if stamps else data).hexdigest()


def whole(now, before, after) -> bool:
    """An output is whole when it is in the state before the command or after it."""
    return now == before or now == after


def whole_by_run(now, before, after) -> bool:
    """A store of whole-folder transactions is whole when each run's rows are as before or as
    after (and it can be read)."""
    if isinstance(now, str):
        return now in (before, after) and now == "absent"
    if isinstance(before, str):
        before = {}
    if isinstance(after, str):
        after = {}
    for run in set(now) | set(before) | set(after):
        if run == "":
            continue      # rows of no run: the refused entries, replaced in their own transaction
        if now.get(run) not in (before.get(run), after.get(run)):
            return False
    return True

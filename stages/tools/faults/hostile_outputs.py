"""What came out of the hostile-input run (hostile.py): every output as text, rows by source file,
and what the databases say about a run."""
from __future__ import annotations

from pathlib import Path

import duckdb

from stages.tools.faults.hostile_folders import Project


def _db_text(db: Path) -> dict[str, str]:
    """Every table of a DuckDB file as text, by table."""
    out = {}
    with duckdb.connect(str(db), read_only=True) as con:
        tables = [r[0] for r in con.execute(
            "select table_name from information_schema.tables where table_type = 'BASE TABLE'").fetchall()]
        for t in tables:
            rows = con.execute(f'select * from "{t}"').fetchall()
            out[t] = "\n".join(map(repr, rows))
    return out


def table_row_counts(db: Path, run_id: str) -> dict[str, int]:
    """Rows of one run in each raw table of a warehouse, by table and file name."""
    counts: dict[str, int] = {}
    with duckdb.connect(str(db), read_only=True) as con:
        for (t,) in con.execute("select table_name from information_schema.columns where "
                                "table_name like 'raw_%' and column_name in ('run_id', 'source_file') "
                                "group by table_name having count(*) = 2").fetchall():
            for f, n in con.execute(f'select source_file, count(*) from "{t}" where run_id = $r '
                                    "group by source_file", {"r": run_id}).fetchall():
                key = f"{t}:{f.rsplit('/', 1)[-1]}"
                counts[key] = counts.get(key, 0) + n
    return counts


def query_db(db: Path, sql: str, params: dict | None = None) -> list[tuple]:
    """The rows of a query on a DuckDB file, opened read-only."""
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or {}).fetchall()


def all_outputs(p: Project, trace_text: str) -> dict[str, str]:
    """Every published or stored output as text: site, docs, facts, derived CSV, databases,
    trace output."""
    data = p.root / "data"
    texts = {}
    for folder in ("site", "docs", "derived"):
        for f in sorted((data / folder).rglob("*")):
            if f.is_file() and not f.is_symlink() and f.suffix in (".html", ".md", ".csv", ".json",
                                                                   ".js", ".svg", ".txt", ".xml"):
                texts[f.relative_to(p.root).as_posix()] = f.read_text(errors="replace")
    for name in ("facts.json", "metrics.json"):
        if (data / name).is_file():
            texts[f"data/{name}"] = (data / name).read_text(errors="replace")
    for db in ("warehouse.duckdb", "campaign.duckdb"):
        if (data / db).is_file():
            for table, text in _db_text(data / db).items():
                texts[f"data/{db}:{table}"] = text
    texts["campaign trace"] = trace_text
    return texts


def trace_all(p: Project, run_ids: set[str]) -> str:
    """`campaign trace` of every published fact about the given runs, in one process."""
    from stages.render import trace
    from stages.core.config import Paths, load_params

    params = load_params(p.root)
    paths = Paths.from_params(params, p.root)
    facts = trace.load_facts(paths.facts)
    chunks = [trace.chain(f, paths) for f in facts if run_ids & set(f.get("run_ids") or [])]
    return "\n".join(chunks)



def has_column(db: Path, table: str, column: str) -> bool:
    """Whether a table of a DuckDB file has the column."""
    return bool(query_db(db, "select count(*) from information_schema.columns where table_name = $t "
                             "and column_name = $c", {"t": table, "c": column})[0][0])


def marked_tampered(db: Path, run_id: str) -> bool:
    """Whether the public runs table marks the run tampered (any boolean column named so)."""
    cols = [c for (c,) in query_db(db, "select column_name from information_schema.columns where "
                                       "table_name = 'runs' and column_name like '%tamper%'")]
    for col in cols:
        got = query_db(db, f'select "{col}" from runs where run_id = $r', {"r": run_id})
        if got and got[0][0] not in (None, False, "", 0):
            return True
    return False

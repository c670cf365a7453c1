"""Ingest nodes: node probe folders -> raw_node* tables of the warehouse (DuckDB).

A node folder is what `stages/probe/node_probe.py` writes: `data/nodes/<node_kind>__<MMDD-HHMMSS>/` with
gpus.csv, topo.txt, nvlink.txt, p2p.jsonl, allreduce.jsonl, env.json and meta.json. The folders
are few and small, so every call reloads all of them in one transaction. Whatever cannot be read
becomes an `ingest_errors` row (run_id null, source_file under the nodes folder) and the rest goes
on. The node tables are defined in stages/core/sql/schema/raw.sql beside the run tables; a node table
whose columns differ from that file is dropped and made again (the run tables are left to
stages/ingest/stage.py).

Example:
    from stages.ingest import nodes as ingest_nodes
    ingest_nodes.run(nodes_dir=Path("data/nodes"), warehouse=Path("data/warehouse.duckdb"),
                     root=Path("."))
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import duckdb

from stages.core import raw_schema
from stages.core.numbers import strict_int
from stages.core.progress import Progress
from stages.core.warehouse import folder_entries, relative, table_columns, text_value, typed_frame
from stages.ingest.parsers import node as node_parser
from stages.formats.run_folder import parse_time

SQL_DIR = Path(__file__).parent / "sql"
SCHEMA_SQL = raw_schema.RAW_SCHEMA
NODE_SQL = SQL_DIR / "ingest_nodes"
# The tables of raw.sql's node probes section; identifiers used in SQL come only from this list.
NODE_TABLES = raw_schema.raw_table_names("node probes", path=SCHEMA_SQL)


# ---------------------------------------------------------------- one folder -> rows by table

def node_row(folder: node_parser.NodeFolder, folder_rel: str) -> dict[str, Any]:
    """The raw_nodes row: meta.json flattened, or what the folder name says when it is absent."""
    meta = folder.meta or {}
    p2p = meta.get("p2p") if isinstance(meta.get("p2p"), dict) else {}
    sizes = meta.get("sizes")
    return {
        "node_id": folder.node_id, "folder": folder_rel,
        "node_kind": text_value(meta.get("node_kind")) or folder.node_id.split("__")[0],
        "status": text_value(meta.get("status")), "backend": text_value(meta.get("backend")),
        "device": text_value(meta.get("device")), "device_count": strict_int(meta.get("device_count")),
        "groups_asked": text_value(meta.get("groups_asked")), "iters": strict_int(meta.get("iters")),
        "warmup": strict_int(meta.get("warmup")),
        "sizes": ",".join(str(s) for s in sizes) if isinstance(sizes, list) else text_value(sizes),
        "p2p_bytes": strict_int(p2p.get("bytes")), "p2p_repeats": strict_int(p2p.get("repeats")),
        "skipped": text_value(meta.get("skipped")), "error": text_value(meta.get("error")),
        "git_sha": text_value(meta.get("git_sha")),
        "started_at": parse_time(meta.get("started_at")),
        "finished_at": parse_time(meta.get("finished_at")),
        "schema_version": strict_int(meta.get("schema_version")),
        "source_file": meta.get("source_file") or folder_rel,
        "source_line": meta.get("source_line") or 1,
    }


def group_rows(folder: node_parser.NodeFolder) -> list[dict[str, Any]]:
    """One row per entry of meta.json `groups`."""
    meta = folder.meta or {}
    groups = meta.get("groups") if isinstance(meta.get("groups"), list) else []
    rows = []
    for g in groups:
        if not isinstance(g, dict) or not g.get("group"):
            continue
        gpus = g.get("gpus")
        rows.append({
            "node_id": folder.node_id, "group_label": str(g["group"]),
            "gpus": ",".join(str(i) for i in gpus) if isinstance(gpus, list) else text_value(gpus),
            "status": text_value(g.get("status")), "sizes_measured": strict_int(g.get("sizes_measured")),
            "error": text_value(g.get("error")),
            "source_file": meta["source_file"], "source_line": meta["source_line"],
        })
    return rows


def folder_tables(folder: Path, root: Path) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Rows of every node table from one folder, and the rows for ingest_errors."""
    node = node_parser.read_node_folder(Path(os.path.abspath(folder)), Path(os.path.abspath(root)))
    tables = {
        "raw_nodes": [node_row(node, relative(folder, root))],
        "raw_node_groups": group_rows(node),
        "raw_node_env": [node.env] if node.env else [],
        "raw_node_env_vars": node.env_vars,
        "raw_node_gpus": node.gpus,
        "raw_node_links": node.links,
        "raw_node_affinity": node.affinity,
        "raw_node_nvlinks": node.nvlinks,
        "raw_node_p2p": node.p2p,
        "raw_node_allreduce": [{**r, "group_label": r.get("group")} for r in node.allreduce],
    }
    errors = [{"run_id": None, "source_file": e["source_file"], "source_line": e["source_line"],
               "reason": e["reason"]} for e in node.errors]
    return tables, errors


# ---------------------------------------------------------------- the warehouse

def _sql(name: str) -> str:
    return (NODE_SQL / name).read_text()


def open_warehouse(warehouse: Path) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """Connect and make the node tables match raw.sql (the whole file runs, as ingest runs it:
    `create table if not exists` leaves the run tables as they are). Returns the node tables
    that had to be made again."""
    schema = SCHEMA_SQL.read_text()
    expected = duckdb.connect()
    expected.execute(schema)
    want = table_columns(expected)
    expected.close()
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(warehouse))
    have = table_columns(con)
    remade = [t for t in NODE_TABLES if t in have and have[t] != want[t]]
    for table in remade:
        con.execute(f"drop table {table}")  # identifier from NODE_TABLES
    con.execute(schema)
    return con, remade


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]],
            columns: list[tuple[str, str]]) -> None:
    if not rows:
        return
    con.register("node_frame", typed_frame(rows, columns))
    try:
        con.execute(f"insert into {table} by name select * from node_frame")  # fixed identifier
    finally:
        con.unregister("node_frame")


def write_all(con: duckdb.DuckDBPyConnection, tables: dict[str, list[dict[str, Any]]],
              errors: list[dict[str, Any]], errors_prefix: str) -> None:
    """Replace every node row, and the node errors, in one transaction."""
    columns = table_columns(con)
    con.execute("begin transaction")
    try:
        for table in NODE_TABLES:
            con.execute(f"delete from {table}")  # identifier from NODE_TABLES
        con.execute(_sql("delete_errors.sql"), {"prefix": errors_prefix})
        for table in NODE_TABLES:
            _insert(con, table, tables[table], columns[table])
        _insert(con, "ingest_errors", errors, columns["ingest_errors"])
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise


# ---------------------------------------------------------------- entry point

def run(*, nodes_dir: Path, warehouse: Path, root: Path, progress: Progress | None = None) -> dict:
    """Reload every node folder under `nodes_dir` into the node tables of `warehouse`.

    Returns counts: nodes (folders read), rows (per table), errors (ingest_errors rows written),
    remade (node tables dropped and made again because raw.sql changed), seconds.
    """
    started = time.perf_counter()
    nodes_dir, warehouse, root = Path(nodes_dir), Path(warehouse), Path(root)
    say = progress or (lambda _line: None)
    entries = folder_entries(nodes_dir)
    folders = [path for path, refusal in entries if refusal is None]
    tables: dict[str, list[dict[str, Any]]] = {t: [] for t in NODE_TABLES}
    errors: list[dict[str, Any]] = [
        {"run_id": None, "source_file": relative(path, root), "source_line": None,
         "reason": f"node folder not read: {refusal}"} for path, refusal in entries if refusal]
    for i, folder in enumerate(folders, start=1):
        try:
            got, bad = folder_tables(folder, root)
        except OSError as exc:
            got = {t: [] for t in NODE_TABLES}
            bad = [{"run_id": None, "source_file": relative(folder, root), "source_line": None,
                    "reason": f"cannot read the node folder: {exc.strerror or exc}"}]
        for table, rows in got.items():
            tables[table].extend(rows)
        errors.extend(bad)
        say(f"ingest nodes {i}/{len(folders)} {folder.name}"
            + (f" ({len(bad)} unreadable)" if bad else ""))
    con, remade = open_warehouse(warehouse)
    try:
        write_all(con, tables, errors, relative(nodes_dir, root).rstrip("/") + "/")
        con.execute("checkpoint")
    finally:
        con.close()
    return {
        "nodes": len(folders),
        "rows": {t: len(rows) for t, rows in tables.items()},
        "errors": len(errors),
        "remade": remade,
        "seconds": round(time.perf_counter() - started, 3),
    }

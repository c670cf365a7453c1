"""Ingest: raw run folders -> raw_* tables of the warehouse (DuckDB).

Incremental: a folder whose fingerprint (its files' names, sizes, mtimes, ctimes and inodes, plus
the version of this code and of the raw schema) is unchanged is skipped; changed folders have their
rows replaced in transactions of whole folders (up to BATCH_FOLDERS at a time); a folder gone from
disk has its rows removed. Whatever cannot be read becomes an `ingest_errors` row and ingest goes on.

Write-once: a run folder is sealed (MANIFEST.sha256, every file and folder read-only; see
stages.formats.sealed.seal). Each folder read is checked file by file against its manifest (sha256),
and the manifest's own sha256 against the one stored at the folder's first ingest (raw_seals).
A folder that no longer matches keeps the rows stored before the change; only its `raw_tampered`
rows say what changed. One that mismatches at its first ingest is read, and marked the same way.
With `seal_unsealed` (the ingest stage sets it), a folder that has no manifest and never had one
is sealed before it is read, once no run is writing it (`sealed.at_rest`): the only write
ingest makes into the runs folder, and never to a file that exists.

Only regular files inside a run folder are read (stages.core.rawfile: no link, FIFO, socket or
device is opened or followed, each file under a size limit; `name.gz` is read decompressed); a
folder that is a link, or whose name is not a run id, is refused whole with an `ingest_errors` row
of the runs folder (run_id null) and counted as runs_refused. Every text value stored goes
through stages.core.secrets.redact_text first.

Big files are read in bulk: the common shapes of stats lines and /metrics samples become columns
(numpy arrays), not one Python object per row, and reach DuckDB as few, large frames.

Example:
    from stages.ingest.stage import run
    run(runs_dir=Path("data/runs"), warehouse=Path("data/warehouse.duckdb"), root=Path("."))
"""
from __future__ import annotations

import errno
import multiprocessing
import os
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any, Iterator

import duckdb

from stages.core.progress import Progress
from stages.core.faults import storage_fault
from stages.core.warehouse import relative
from stages.ingest.folders import (MANIFEST, SealFound, code_version, folder_manifest_sha256, plan_folders,
                                   run_folders, seal_mark)
from stages.ingest.read import read_folder
from stages.ingest.seal_check import check_seal
from stages.ingest.rows import ROW_TABLES, FolderRows
from stages.ingest.write import (ingest_sql, known_folders, open_warehouse, raw_columns, record_refused,
                                 remove_run, write_batch)

PARALLEL_MIN_BYTES = 64 * 1024 * 1024
MAX_WORKERS = 8
# Folders are written in batches (one transaction each) of at most this many folders or rows
# of the big tables, whichever comes first.
BATCH_FOLDERS = 64
BATCH_ROWS = 1_000_000
BULK_TABLES = ("raw_log_stats", "raw_metrics", "raw_bench_requests")
READ_AHEAD = 8                 # folders read ahead of the writer, per worker process


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _seal_note(rows: FolderRows, folder_row: dict[str, Any], was_stored: bool) -> str:
    """What the progress line says of a folder's seal."""
    note = ""
    if folder_row["sealed_at"] is not None:
        note += f", sealed at ingest {folder_row['sealed_at']:%Y-%m-%d %H:%M:%S} UTC"
    changed = sorted({row["file"] for row in rows.tables["raw_tampered"]})
    if changed:
        kept = "rows of its first ingest kept" if was_stored else "read as it is, marked tampered"
        note += f", TAMPERED ({', '.join(changed)}): {kept}"
    return note


def _workers(plans: list[tuple[Path, list, str]]) -> int:
    """Processes to read folders with: one per core when there is enough to read."""
    total = sum(size for _, files, _ in plans for _, size, _ in files)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    if len(plans) < 2 or total < PARALLEL_MIN_BYTES or cores < 2:
        return 1
    return min(cores, len(plans), MAX_WORKERS)


def _read_planned(plan: tuple[Path, list, str], root: Path) -> FolderRows:
    folder, files, _ = plan
    return read_folder(folder, root, files)


def _in_order(pool: ProcessPoolExecutor, plans: list[tuple[Path, list, str]], root: Path,
              ahead: int) -> Iterator[FolderRows]:
    """The folders read by the pool, in plan order, with at most `ahead` read or being read
    beyond the one consumed (so a slow writer does not pile results up in memory)."""
    pending: deque = deque()
    todo = iter(plans)
    for plan in islice(todo, ahead):
        pending.append(pool.submit(_read_planned, plan, root))
    while pending:
        done = pending.popleft().result()
        plan = next(todo, None)
        if plan is not None:
            pending.append(pool.submit(_read_planned, plan, root))
        yield done


def run(*, runs_dir: Path, warehouse: Path, root: Path, progress: Progress | None = None,
        seal_unsealed: bool = False) -> dict:
    """Read every changed run folder under `runs_dir` into the raw tables of `warehouse`.
    `seal_unsealed` seals each folder that arrives without a manifest first (the ingest stage
    sets it; a reader of someone else's folders, such as `trace --verify`, does not).

    Returns counts: runs_seen, runs_read, runs_skipped, runs_removed, runs_refused (entries of
    runs_dir that are not read: links, names that are not run ids), runs_sealed (sealed by this
    ingest), runs_tampered (read this time and found changed since sealed), rows (per table,
    written this time), errors (ingest_errors rows written this time, refusals included),
    bytes_read, workers, seconds.
    """
    started = time.perf_counter()
    runs_dir, warehouse, root = Path(runs_dir), Path(warehouse), Path(root)
    say = progress or (lambda _line: None)
    version = code_version()
    known, rebuilt, seals = known_folders(warehouse)
    run_dirs, refused = run_folders(runs_dir)
    folders, plans, found = plan_folders(run_dirs, known, version, seals, seal_unsealed)
    workers = _workers(plans)
    # The worker processes start before the warehouse is opened for writing.
    pool = (ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
            if workers > 1 else None)
    try:
        con, _ = open_warehouse(warehouse)
        try:
            summary = _ingest(con, folders, plans, root, say, pool, workers, found, runs_dir)
            record_refused(con, runs_dir, root, refused)
            for reason in refused:
                say(f"ingest refused {reason}")
            summary["runs_refused"] = len(refused)
            summary["errors"] += len(refused)
        finally:
            con.close()
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    summary.update(rebuilt=rebuilt, workers=workers,
                   seconds=round(time.perf_counter() - started, 3))
    return summary


def _ingest(con: duckdb.DuckDBPyConnection, folders: list[Path], plans: list[tuple[Path, list, str]],
            root: Path, say: Progress, pool: ProcessPoolExecutor | None, workers: int = 1,
            found: dict[str, SealFound] | None = None, runs_dir: Path | None = None) -> dict[str, Any]:
    columns = raw_columns(con)
    known = dict(con.execute(ingest_sql("folders.sql")).fetchall())
    seals = dict(con.execute(ingest_sql("seals.sql")).fetchall())
    found = found or {}
    summary: dict[str, Any] = {
        "runs_seen": len(folders), "runs_read": 0, "runs_skipped": len(folders) - len(plans),
        "runs_removed": 0, "runs_sealed": 0, "runs_tampered": 0, "rows": {t: 0 for t in ROW_TABLES},
        "errors": 0, "bytes_read": 0,
    }
    on_disk = {f.name for f in folders}
    gone = sorted(set(known) - on_disk)
    if gone and runs_dir is not None and not runs_dir.is_dir():
        # the runs folder itself is missing (storage unmounted, gone mid-ingest): that is no
        # evidence that its runs were removed, so none of their rows are
        raise storage_fault(relative(runs_dir, root), FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT)))
    for run_id in gone:
        remove_run(con, run_id)
        summary["runs_removed"] += 1
        say(f"ingest removed {run_id} (folder gone)")
    if pool is not None:
        results = _in_order(pool, plans, root, READ_AHEAD * workers)
    else:
        results = (_read_planned(plan, root) for plan in plans)
    stored = set(known)
    batch: list[tuple[FolderRows, dict[str, Any]]] = []
    done = 0

    def flush() -> None:
        nonlocal done
        for (rows, folder_row), counts in zip(batch, write_batch(con, columns, batch, stored)):
            for table, count in counts.items():
                summary["rows"][table] += count
            summary["errors"] += counts.get("ingest_errors", 0)
            summary["runs_read"] += 1
            summary["bytes_read"] += folder_row["bytes"]
            summary["runs_sealed"] += folder_row["sealed_at"] is not None
            summary["runs_tampered"] += bool(rows.tables["raw_tampered"])
            done += 1
            say(f"ingest {done}/{len(plans)} {rows.run_id} {_size(folder_row['bytes'])}"
                + _seal_note(rows, folder_row, rows.run_id in stored))
        for rows, folder_row in batch:      # the seal is recorded: its mark has done its work
            if folder_row["sealed_at"] is not None and runs_dir is not None:
                seal_mark(runs_dir / rows.run_id).unlink(missing_ok=True)
        batch.clear()

    for (folder, files, fp), rows in zip(plans, results):
        seal_found = found.get(folder.name) or SealFound(folder_manifest_sha256(folder))
        check_seal(rows, relative(folder / MANIFEST, root), seal_found, seals.get(folder.name))
        folder_row = {"run_id": folder.name, "folder": relative(folder, root), "fingerprint": fp,
                      "files": len(files), "bytes": sum(s for _, s, _ in files),
                      "ingested_at": datetime.now(timezone.utc),
                      "manifest_sha256": seal_found.manifest_sha256, "sealed_at": seal_found.sealed_at}
        batch.append((rows, folder_row))
        if (len(batch) >= BATCH_FOLDERS
                or sum(rows.count(t) for rows, _ in batch for t in BULK_TABLES) >= BATCH_ROWS):
            flush()
    flush()
    con.execute("checkpoint")
    return summary

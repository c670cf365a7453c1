"""A side of `campaign diff` and what the diff reads from its tables.

A side is its label, its run ids and the tables they are read from: the current campaign
database, or the public tables as a git revision committed them (data/derived/*.csv through DVC).
From them come the side's benchmark points, its agents workloads shaped like points, and each
point's samples (per-request TTFT and TPOT, each repeat's output throughput) that the confidence
interval of a change rests on (stages/render/diff.py compares them, stages/render/diff_stats.py
draws the interval).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from stages.core.config import CampaignError, Paths
from stages.core.files import write_file

SQL = Path(__file__).parent / "sql" / "diff"
TABLES = ("runs", "launches", "gates", "bench_points")
OPTIONAL_TABLES = ("agent_runs", "bench_requests", "turn_requests", "invalid_rows")     # absent from campaigns derived before it existed


@dataclass(frozen=True)
class Side:
    label: str
    run_ids: list[str]
    source: str          # "current" or a git revision
    db: duckdb.DuckDBPyConnection


def _sql(name: str) -> str:
    return (SQL / f"{name}.sql").read_text()


def _rows(cur) -> list[dict]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def tables_at_rev(root: Path, paths: Paths, rev: str) -> duckdb.DuckDBPyConnection:
    """The public tables as committed at `rev` (data/derived/*.csv through DVC)."""
    import tempfile

    import dvc.api

    db = duckdb.connect()
    derived = paths.derived.relative_to(paths.root).as_posix()
    with tempfile.TemporaryDirectory(prefix="campaign-diff-") as tmp:
        for table in TABLES + OPTIONAL_TABLES:
            try:
                text = dvc.api.read(f"{derived}/{table}.csv", repo=str(root), rev=rev)
            except Exception as exc:  # DVC raises many types; one line is what the user needs
                if table in OPTIONAL_TABLES:
                    continue
                raise CampaignError(f"revision {rev}: cannot read {derived}/{table}.csv through "
                                    f"DVC ({type(exc).__name__}); was dvc.lock committed there?") from None
            csv_file = Path(tmp) / f"{table}.csv"
            write_file(csv_file, text)
            # table names come from the fixed TABLES list; a line may be as long as the file (a
            # request's generated text of millions of characters: DuckDB stops at 2 MB unless told)
            db.execute(f"create table {table} as select * from read_csv($f, header = true, "
                       "max_line_size = $most)", {"f": str(csv_file), "most": csv_file.stat().st_size + 1})
        # tables derived before bench_points counted its TTFT requests: unknown, not zero
        db.execute("alter table bench_points add column if not exists ttft_requests integer")
        # ... and before it said where its figures come from: all from requests then
        db.execute("alter table bench_points add column if not exists figures_from varchar default 'requests'")
        # ... and before turn_requests marked the requests whose output came in one burst
        if _has_table(db, "turn_requests"):
            db.execute("alter table turn_requests add column if not exists burst boolean default false")
    return db

def is_run(db: duckdb.DuckDBPyConnection, token: str) -> bool:
    """Whether `token` is the id of a run of these tables (any attempt, reported or not)."""
    return db.execute(_sql("run"), {"run_id": token}).fetchone()[0] > 0

def _has_table(db: duckdb.DuckDBPyConnection, table: str) -> bool:
    return db.execute("select count(*) from information_schema.tables where table_name = $t",
                      {"t": table}).fetchone()[0] > 0


def side_points(side: Side) -> list[dict]:
    """A side's benchmark points, and its agents workloads shaped like points where it has them."""
    rows = _rows(side.db.execute(_sql("side_points"), {"run_ids": side.run_ids}))
    if _has_table(side.db, "agent_runs"):
        rows += _rows(side.db.execute(_sql("side_agent_points"), {"run_ids": side.run_ids}))
    return rows

def _point_key(row: dict) -> tuple:
    return (row["match_key"], row["workload"], row["concurrency"], row["point_table"])


def side_samples(side: Side, points: list[dict]) -> dict[tuple, dict[str, list[float]]]:
    """Each point's samples on one side, repeats pooled: per-request TTFT and TPOT, and the
    output throughput of each repeat. Keyed like _point_key."""
    out: dict[tuple, dict[str, list[float]]] = {}
    by_run: dict[tuple, tuple] = {}
    for p in points:
        key = _point_key(p)
        sample = out.setdefault(key, {"ttft_s": [], "tpot_ms": [], "output_tok_s": []})
        if p.get("output_tok_s") is not None:
            sample["output_tok_s"].append(float(p["output_tok_s"]))
        by_run[(p["point_table"], p["run_id"], p["workload"],
                p["concurrency"] if p["point_table"] == "bench_points" else None)] = key
    if _has_table(side.db, "bench_requests"):
        requests = _rows(side.db.execute(_sql("side_requests"), {"run_ids": side.run_ids}))
        flags = None
        if requests and "counts_for_ttft" not in requests[0] and _has_table(side.db, "invalid_rows"):
            flags = {(f["run_id"], f["point_id"], f["request_idx"]): f for f in
                     _rows(side.db.execute(_sql("side_request_flags"), {"run_ids": side.run_ids}))}
        for q in requests:
            key = by_run.get(("bench_points", q["run_id"], q["workload"], q["concurrency"]))
            if key is None or not q["ok"]:
                continue
            if "counts_for_ttft" in q:      # derive's own rule, where the side's bench_requests has it
                ttft_ok, tpot_ok = q["counts_for_ttft"], q["counts_for_tpot"]
            elif flags is None:
                ttft_ok, tpot_ok = q["valid"], True
            else:
                f = flags.get((q["run_id"], q["point_id"], q["request_idx"]), {})
                ttft_ok, tpot_ok = not f.get("excluded_from_ttft"), not f.get("excluded_from_tpot")
            if ttft_ok and q["ttft_s"] is not None:
                out[key]["ttft_s"].append(float(q["ttft_s"]))
            if tpot_ok and q["tpot_ms"] is not None:
                out[key]["tpot_ms"].append(float(q["tpot_ms"]))
    if _has_table(side.db, "turn_requests"):
        for q in _rows(side.db.execute(_sql("side_agent_requests"), {"run_ids": side.run_ids})):
            key = by_run.get(("agent_runs", q["run_id"], q["workload"], None))
            if key is None:
                continue
            for col in ("ttft_s", "tpot_ms"):
                if q[col] is not None:
                    out[key][col].append(float(q[col]))
    return out

"""`campaign diff`: two run sets side by side, point by point, with what got better or worse.

A side is named by a run set from params (`run_sets`), a spec, an image (full name or bare tag),
or a git revision (the public tables as they were then, read through DVC from data/derived).
Agents workloads (table agent_runs, where a side has it) are compared like benchmark points, with
their session count as the concurrency. Points are matched on model, layout and context (those that tell the two sides apart are left
out of the match), workload and concurrency. Each metric row carries both values, the change and
a mark: better, worse, same (within the tolerance), new failure, fixed, not comparable (a setting
that changes the meaning differs: max model length or KV cache dtype), no TTFT (a side's point
has no TTFT: every request failed or came from the prefix cache), only in base / only in head, and
a note naming the side a caution applies to (capacity-limited, no TTFT, provisional).
"""
from __future__ import annotations

import csv
import io
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import duckdb

from stages.core.config import CampaignError, Paths
from stages.render import run_sets as run_set_lib

SQL = Path(__file__).parent / "sql" / "diff"
TABLES = ("runs", "launches", "gates", "bench_points")
OPTIONAL_TABLES = ("agent_runs",)     # absent from campaigns derived before it existed
KEY_ATTRS = ("model", "layout", "ctx_label")


@dataclass(frozen=True)
class Side:
    label: str
    run_ids: list[str]
    source: str          # "current" or a git revision
    db: duckdb.DuckDBPyConnection


@dataclass(frozen=True)
class Result:
    base: str
    head: str
    key_attrs: list[str]
    points: list[dict]
    launches: list[dict]


def _sql(name: str) -> str:
    return (SQL / f"{name}.sql").read_text()


def _rows(cur) -> list[dict]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def is_git_rev(root: Path, token: str) -> bool:
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{token}^{{commit}}"],
                         cwd=root, capture_output=True, text=True)
    return out.returncode == 0


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
            csv_file.write_text(text)
            # table names come from the fixed TABLES list
            db.execute(f"create table {table} as select * from read_csv($f, header = true)",
                       {"f": str(csv_file)})
        # tables derived before bench_points counted its TTFT requests: unknown, not zero
        db.execute("alter table bench_points add column if not exists ttft_requests integer")
        # ... and before it said where its figures come from: all from requests then
        db.execute("alter table bench_points add column if not exists figures_from varchar default 'requests'")
    return db


def resolve(token: str, *, params: dict, paths: Paths, current: duckdb.DuckDBPyConnection) -> Side:
    run_sets = params.get("run_sets") or {}
    specs = params.get("specs") or {}
    if token in run_sets:
        rs = run_set_lib.definition(token, run_sets, "params.yaml run_sets")
        return Side(token, run_set_lib.select(current, rs, current_only=True), "current", current)
    if token in specs:
        return Side(token, run_set_lib.select(current, {"specs": [token]}, current_only=True),
                    "current", current)
    by_image = run_set_lib.select(current, {"image": token}, current_only=True)
    if by_image:
        return Side(token, by_image, "current", current)
    if is_git_rev(paths.root, token):
        db = tables_at_rev(paths.root, paths, token)
        ids = [r[0] for r in db.execute("select run_id from runs where is_current order by run_id").fetchall()]
        return Side(token, ids, token, db)
    known = ", ".join(list(run_sets) + list(specs))
    raise CampaignError(f"{token!r} is not a run set, spec, image or git revision (known: {known})")


def _has_table(db: duckdb.DuckDBPyConnection, table: str) -> bool:
    return db.execute("select count(*) from information_schema.tables where table_name = $t",
                      {"t": table}).fetchone()[0] > 0


def side_points(side: Side) -> list[dict]:
    """A side's benchmark points, and its agents workloads shaped like points where it has them."""
    rows = _rows(side.db.execute(_sql("side_points"), {"run_ids": side.run_ids}))
    if _has_table(side.db, "agent_runs"):
        rows += _rows(side.db.execute(_sql("side_agent_points"), {"run_ids": side.run_ids}))
    return rows


def compare(base: Side, head: Side, *, tolerance_pct: float = 5.0) -> Result:
    if not base.run_ids:
        raise CampaignError(f"base {base.label!r} selects no runs")
    if not head.run_ids:
        raise CampaignError(f"head {head.label!r} selects no runs")
    work = duckdb.connect()
    point_rows = {s: side_points(side) for s, side in (("base", base), ("head", head))}
    launch_rows = {s: _rows(side.db.execute(_sql("side_launches"), {"run_ids": side.run_ids}))
                   for s, side in (("base", base), ("head", head))}
    key_attrs = match_attributes(launch_rows["base"], launch_rows["head"])
    for name, rows_by_side in (("side_points", point_rows), ("side_launches", launch_rows)):
        rows = [{**r, "side": s, "match_key": " / ".join(str(r[a]) for a in key_attrs) or "all"}
                for s, rows in rows_by_side.items() for r in rows]
        _load(work, name, rows)
    params = {"tolerance_pct": tolerance_pct}
    points = _rows(work.execute(_sql("points"), params))
    launches = _rows(work.execute(_sql("launches"), params))
    return Result(base.label, head.label, key_attrs, points, launches)


def match_attributes(base: list[dict], head: list[dict]) -> list[str]:
    """Attributes that identify a point across sides. One that has a single value on each side
    (and differs) is what tells the sides apart, so matching on it would match nothing."""
    keep = []
    for attr in KEY_ATTRS:
        b = {r[attr] for r in base}
        h = {r[attr] for r in head}
        if len(b) == 1 and len(h) == 1 and b != h:
            continue
        keep.append(attr)
    return keep


def _load(db: duckdb.DuckDBPyConnection, name: str, rows: list[dict]) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)  # noqa: F841  (read by DuckDB by name)
    db.execute(f"create table {name} as select * from frame")


# ---------------------------------------------------------------- output

POINT_COLS = ("match_key", "workload", "concurrency", "metric", "base_value", "head_value",
              "change_pct", "mark", "note")
LAUNCH_COLS = ("match_key", "item", "base_value", "head_value", "change_pct", "mark")


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _pct(v) -> str:
    return "-" if v is None else f"{v:+.1f}%"


def _cells(row: dict, cols) -> list[str]:
    return [_pct(row[c]) if c == "change_pct" else _fmt(row[c]) for c in cols]


def render(result: Result, fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"base": result.base, "head": result.head, "match_on": result.key_attrs,
                           "launches": result.launches, "points": result.points},
                          indent=2, default=str)
    if fmt == "csv":
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=["table", *sorted({k for r in result.points + result.launches for k in r})])
        w.writeheader()
        for r in result.launches:
            w.writerow({"table": "launches", **r})
        for r in result.points:
            w.writerow({"table": "points", **r})
        return out.getvalue()
    blocks = []
    for title, rows, cols in (("Launches and gates", result.launches, LAUNCH_COLS),
                              ("Benchmark points", result.points, POINT_COLS)):
        body = [_cells(r, cols) for r in rows]
        heads = [c.replace("_", " ") for c in cols]
        heads[heads.index("base value")] = f"base ({result.base})"
        heads[heads.index("head value")] = f"head ({result.head})"
        if fmt == "markdown":
            lines = [f"### {title}", "", "| " + " | ".join(heads) + " |",
                     "| " + " | ".join("---" for _ in heads) + " |"]
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
        else:
            widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
                      for i, h in enumerate(heads)]
            lines = [title, "  ".join(h.ljust(w) for h, w in zip(heads, widths)),
                     "  ".join("-" * w for w in widths)]
            lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
        blocks.append("\n".join(lines))
    summary = {}
    for r in result.points + result.launches:
        summary[r["mark"]] = summary.get(r["mark"], 0) + 1
    tail = "matched on " + (", ".join(result.key_attrs + ["workload", "concurrency"]))
    tail += "; " + ", ".join(f"{n} {m}" for m, n in sorted(summary.items()))
    return "\n\n".join(blocks) + "\n\n" + tail + "\n"


# ---------------------------------------------------------------- facts between revisions

def facts_at(paths: Paths, rev: str) -> dict[str, dict]:
    """The published facts at a git revision (data/facts.json through DVC), by id.
    `rev` "workspace" reads the file as it is now."""
    import dvc.api

    rel = paths.facts.relative_to(paths.root).as_posix()
    if rev == "workspace":
        text = paths.facts.read_text() if paths.facts.exists() else None
    else:
        try:
            text = dvc.api.read(rel, repo=str(paths.root), rev=rev)
        except Exception as exc:  # DVC raises many types; one line is what the user needs
            raise CampaignError(f"revision {rev}: cannot read {rel} through DVC "
                                f"({type(exc).__name__}); was dvc.lock committed there?") from None
    if text is None:
        raise CampaignError(f"{rel}: not found (run `dvc repro render` first)")
    return {f["id"]: f for f in json.loads(text)}


def diff_facts(base: dict[str, dict], head: dict[str, dict]) -> list[dict]:
    """Every published number that changed, appeared or went away between two fact sets."""
    rows = []
    for fid in sorted(set(base) | set(head)):
        b, h = base.get(fid), head.get(fid)
        if b and h and b.get("value") == h.get("value"):
            continue
        rows.append({
            "fact": fid,
            "change": "changed" if b and h else ("new" if h else "removed"),
            "base_value": b.get("display") if b else None,
            "head_value": h.get("display") if h else None,
            "base_runs": ", ".join(b.get("run_ids") or []) if b else None,
            "head_runs": ", ".join(h.get("run_ids") or []) if h else None,
            "pages": ", ".join(sorted(set((b or {}).get("pages") or []) | set((h or {}).get("pages") or []))),
        })
    return rows


def render_facts(rows: list[dict], fmt: str, base: str, head: str) -> str:
    if fmt == "json":
        return json.dumps({"base": base, "head": head, "facts": rows}, indent=2)
    cols = ["fact", "change", "base_value", "head_value", "base_runs", "head_runs", "pages"]
    if fmt == "csv":
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
        return out.getvalue()
    body = [[_fmt(r[c]) for c in cols] for r in rows]
    heads = ["fact", "change", f"base ({base})", f"head ({head})", "base runs", "head runs", "pages"]
    if fmt == "markdown":
        lines = ["| " + " | ".join(heads) + " |", "| " + " | ".join("---" for _ in heads) + " |"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    else:
        widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(heads)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths)), "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(lines) + f"\n\n{len(rows)} published numbers differ between {base} and {head}\n"

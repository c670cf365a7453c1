"""`campaign trace`: from a number in the article back to the run, the raw line and the command.

The chain of a fact: its query and parameters -> the derived rows it read -> the raw file and
line, with the excerpt as it is in the file now -> the run folder, its cmd.sh, image and digest ->
the stage that computed it and that stage's hash in dvc.lock -> the git sha of the build.
`verify` recomputes the fact by its own SQL against the campaign derived again from the raw files
alone (stages/tools/rederive.py does that in a scratch folder) and says whether the published value
still follows.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import yaml

from stages.core.config import CampaignError, Paths
from stages.render.evidence import RawFileRefused, read_line, read_raw
from stages.render.inputs import recompute
from stages.render.numbers import format_value, with_unit
from stages.render.queries import fact_query_path, tables_in
from stages.core.secrets import redact_text, redact_value

MAX_ROWS = 5
SMALL_FILE = 1 << 20   # bytes read from a run's meta.json or cmd.sh


@dataclass(frozen=True)
class Verdict:
    fact_id: str
    published: Any
    recomputed: Any
    matches: bool
    line_matches: bool | None
    detail: str


def load_facts(facts_file: Path) -> list[dict]:
    try:
        return json.loads(facts_file.read_text())
    except FileNotFoundError:
        raise CampaignError(f"{facts_file}: not found (run `dvc repro render` first)") from None


def find(facts: list[dict], key: str) -> dict:
    """A fact by id, or by name when exactly one fact has that name."""
    by_id = [f for f in facts if f["id"] == key]
    if by_id:
        return by_id[0]
    by_name = [f for f in facts if f["name"] == key]
    if len(by_name) == 1:
        return by_name[0]
    if by_name:
        ids = ", ".join(f["id"] for f in by_name[:5])
        raise CampaignError(f"{key!r} names {len(by_name)} facts; give an id ({ids}, ...)")
    raise CampaignError(f"unknown fact {key!r} (see data/facts.json, or trace --value)")


def find_by_value(facts: list[dict], value: str) -> list[dict]:
    """Facts printed as `value` (as displayed, or numerically equal)."""
    want = value.replace(",", "").strip()
    try:
        number = float(want)
    except ValueError:
        number = None
    hits = []
    for f in facts:
        shown = str(f.get("display", "")).replace(",", "")
        if shown == want:
            hits.append(f)
        elif number is not None and isinstance(f.get("value"), (int, float)) \
                and not isinstance(f.get("value"), bool) and math.isclose(f["value"], number, rel_tol=1e-9):
            hits.append(f)
    return hits


def _raw_dirs(paths: Paths) -> tuple[Path, ...]:
    return (paths.runs, paths.nodes)


def _run_file(paths: Paths, run_id: str, name: str) -> str | None:
    """A small file of a run folder as text, or None when absent or refused (a link, a FIFO)."""
    if "/" in run_id or run_id in ("", ".", ".."):
        return None
    try:
        data, _ = read_raw(paths.runs / run_id / name, (paths.runs,), SMALL_FILE)
    except (RawFileRefused, OSError):
        return None
    return data.decode("utf-8", errors="replace")


def _run_meta(paths: Paths, run_id: str) -> dict:
    """The run's image, digest, engine and version: its row of the public runs table (which holds
    them for a run without meta.json too, read from its other files: `inferred` names which), else
    its meta.json."""
    if paths.campaign_db.exists():
        with duckdb.connect(str(paths.campaign_db), read_only=True) as db:
            cur = db.execute("select * from runs where run_id = $r", {"r": run_id})
            row = cur.fetchone()
            if row is not None:
                return dict(zip([d[0] for d in cur.description], row))
    try:
        meta = json.loads(_run_file(paths, run_id, "meta.json") or "{}")
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def _cmd_line(paths: Paths, run_id: str) -> str | None:
    lines = (_run_file(paths, run_id, "cmd.sh") or "").splitlines()
    body = [ln for ln in lines if ln.strip() and not ln.startswith("#")]
    return body[-1] if body else None


def stage_hash(root: Path, stage: str, out_path: str) -> str | None:
    """The md5 dvc.lock records for `stage`'s output `out_path` (what the fact was computed from)."""
    try:
        lock = yaml.safe_load((root / "dvc.lock").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    for out in (lock.get("stages", {}).get(stage, {}) or {}).get("outs", []) or []:
        if out.get("path") == out_path:
            return out.get("md5") or out.get("hash")
    return None


def derived_rows(db_file: Path, fact: dict) -> list[tuple[str, list[dict]]]:
    """Rows of the public tables the fact's query reads, for its runs."""
    if not db_file.exists():
        return []
    out = []
    with duckdb.connect(str(db_file), read_only=True) as db:
        for table in tables_in(fact["sql"]):
            cols = [c[0] for c in db.execute(f"describe {table}").fetchall()]  # fixed table list
            if "run_id" not in cols or not fact["run_ids"]:
                continue
            cur = db.execute(f"select * from {table} where run_id in (select unnest($ids)) limit {MAX_ROWS}",
                             {"ids": fact["run_ids"]})
            names = [d[0] for d in cur.description]
            out.append((table, [dict(zip(names, r)) for r in cur.fetchall()]))
    return out


def chain(fact: dict, paths: Paths, limit: int | None = 20) -> str:
    """The whole chain behind one fact, as lines of text, redacted."""
    lines = [
        f"fact      {fact['id']}",
        f"value     {with_unit(fact.get('display') or format_value(fact['value']), fact.get('unit'))}",
        f"query     {fact_query_path(fact['name'])}  params {json.dumps(fact['params'])}",
    ]
    for table, rows in derived_rows(paths.campaign_db, fact):
        for row in rows:
            brief = {k: v for k, v in row.items() if v is not None and k != "generated_text"}
            lines.append(f"row       {table}: {json.dumps(brief, default=str)[:300]}")
    if fact.get("source_file"):
        now = read_line(paths.root, fact["source_file"], fact["source_line"], _raw_dirs(paths))
        lines.append(f"raw       {fact['source_file']}:{fact['source_line']}")
        lines.append(f"excerpt   {now}")
        if fact.get("excerpt") and now != fact["excerpt"]:
            lines.append(f"warning   the line differs from the excerpt published: {fact['excerpt']}")
    if fact.get("source_note"):
        lines.append(f"note      {fact['source_note']}")
    if fact.get("marks"):
        lines.append(f"marks     {', '.join(fact['marks'])}")
    for run_id in fact.get("run_ids") or []:
        meta = _run_meta(paths, run_id)
        lines.append(f"run       {paths.runs.relative_to(paths.root) / run_id}")
        lines.append(f"cmd.sh    {_cmd_line(paths, run_id) or '-'}")
        lines.append(f"image     {meta.get('image') or 'none (local process)'}"
                     f"  digest {meta.get('image_digest') or '-'}  engine {meta.get('engine')} "
                     f"{meta.get('engine_version') or ''}".rstrip())
        if meta.get("inferred"):
            lines.append(f"inferred  {meta['inferred']} (no meta.json: read from the run's other "
                         "files; run_inferred names each line)")
    db_rel = str(paths.campaign_db.relative_to(paths.root))
    lines.append(f"stage     {fact['stage']}  (dvc.lock md5 of {db_rel}: "
                 f"{stage_hash(paths.root, fact['stage'], db_rel) or '-'}; re-run: dvc repro {fact['stage']})")
    lines.append(f"git       {fact.get('git_sha') or '-'}")
    lines += input_lines(fact, limit)
    return redact_text("\n".join(lines))


def input_lines(fact: dict, limit: int | None) -> list[str]:
    """The inputs of a fact computed from many rows (its statistic, then one line per row, the
    first `limit` of them), as `chain` prints them."""
    rows = fact.get("input_rows") or []
    if not fact.get("statistic"):
        return []
    used = sum(1 for r in rows if r["used"])
    lines = [f"inputs    {fact['statistic']} of {used} used, of {len(rows)} rows"]
    for row in rows[: limit if limit is not None else len(rows)]:
        mark = "used" if row["used"] else f"left out: {row.get('reason') or '-'}"
        lines.append(f"input     {row['file']} {row['path']} = {format_value(row['value'])}  ({mark})")
    if limit is not None and len(rows) > limit:
        lines.append(f"input     ... {len(rows) - limit} more (--limit)")
    return lines


def verify(fact: dict, *, paths: Paths, campaign_db: Path) -> Verdict:
    """Recompute `fact` by the published SQL against `campaign_db`, the campaign derived again from
    the raw run folders now (stages/tools/rederive.py), and judge it against what was published."""
    with duckdb.connect(str(campaign_db), read_only=True) as db:
        rows = db.execute(fact["sql"], fact["params"]).fetchall()
    if len(rows) != 1:
        return Verdict(fact["id"], fact["value"], None, False, None,
                       f"the query now returns {len(rows)} rows")
    recomputed = redact_value(rows[0][0])   # as published
    matches = _same(fact["value"], recomputed)
    from_inputs = recompute(fact["statistic"], fact.get("input_rows") or []) if fact.get("statistic") else None
    inputs_ok = None if not fact.get("statistic") else _same(fact["value"], from_inputs)
    line_ok = None
    if fact.get("source_file") and fact.get("excerpt") is not None:
        line_ok = read_line(paths.root, fact["source_file"], fact["source_line"],
                            _raw_dirs(paths)) == fact["excerpt"]
    detail = "matches" if matches else f"published {fact['value']!r}, recomputed {recomputed!r}"
    if inputs_ok is not None:
        detail += ("; its listed inputs give it again" if inputs_ok else
                   f"; its listed inputs give {from_inputs!r}")
    if line_ok is False:
        detail += "; the raw line no longer reads as published"
    return Verdict(fact["id"], fact["value"], recomputed,
                   matches and line_ok is not False and inputs_ok is not False, line_ok,
                   redact_text(detail))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return str(a) == str(b)

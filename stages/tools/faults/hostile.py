"""Hostile and careless inputs, end to end: the integrity part of `make reliability`.

A scratch project (this project's params.yaml, site/ and mkdocs.yml) gets the intact fixture run
folder and, beside it, copies damaged the way an attacker or a careless user would: files linked
to places outside the project, a FIFO and /dev/zero for an engine log, a folder linked from
outside, folder names that carry script, secrets in a folder another campaign wrote, files edited
after sealing (with their size and mtime kept, or with the manifest rewritten to match), odd
result files, a compressed log, duplicate keys, a folder copied under a name that is not a run id.
Then the real commands run on it (`campaign ingest`, `derive`, `render`, `trace`), and the
settings a careless user could give (outputs pointed at the raw runs, two commands at once,
impossible params) are tried too.

Each case reports its outcome; the summary counts what must be zero: rows lost, files from
outside the project published, secrets in the site, warehouse, facts or trace output, and scripts
that run in Chromium (`browse`, given by the caller, loads the built pages).
"""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from stages.tools.faults.hostile_folders import (FOLDER_CASES, HOSTILE_NAMES, MARKER, SECRETS, copy_fixture, make_writable,
                                          tree_digest, damage_folders, make_project, tamper)
from stages.tools.faults.hostile_outputs import (all_outputs, has_column, marked_tampered, query_db, table_row_counts,
                                          trace_all)
from stages.tools.faults.hostile_settings import (BAD_PARAMS, Case, bad_params_case, concurrent_case,
                                           dry_run_case, overlap_case)

Browse = Callable[[Path, list[Path]], dict[str, int]]


@dataclass
class Result:
    cases: list[Case] = field(default_factory=list)
    rows_lost: int = 0
    outside_published: list[str] = field(default_factory=list)
    secrets_published: list[str] = field(default_factory=list)
    scripts_run: int = 0
    pages_browsed: int = 0
    runs_changed: list[str] = field(default_factory=list)
    seconds: float = 0.0


# ---------------------------------------------------------------- the whole run

def run(workdir: Path, *, browse: Browse | None = None, progress=lambda s: None) -> Result:
    t0 = time.perf_counter()
    result = Result()
    p = make_project(workdir)
    folders = damage_folders(p)

    # The intact folder alone, for the rows every other case must leave standing.
    alone = make_project(workdir / "alone")
    copy_fixture(alone.runs / folders["intact"])
    _check(alone.cli("ingest"), "ingest of the intact folder")
    intact_rows = table_row_counts(alone.root / "data" / "warehouse.duckdb", folders["intact"])

    progress("ingesting the hostile run folders (first time)")
    first = p.cli("ingest", timeout=120)
    warehouse = p.root / "data" / "warehouse.duckdb"
    first_rows = {name: table_row_counts(warehouse, folders[name]) for name in
                  ("edited after sealing, size and mtime kept", "manifest rewritten to match an edit")}
    tamper(p, folders)
    progress("ingesting again after two sealed folders were edited")
    second = p.cli("ingest", timeout=120)
    progress("derive and render (mkdocs build) of the hostile campaign")
    derive = p.cli("derive")
    render = p.cli("render")
    for step, proc in (("first ingest", first), ("second ingest", second), ("derive", derive),
                       ("render", render)):
        _check(proc, step)

    run_ids = {r[0] for r in query_db(warehouse, "select run_id from raw_runs")}
    errors = query_db(warehouse, "select run_id, source_file, reason from ingest_errors")
    campaign_db = p.root / "data" / "campaign.duckdb"

    def errors_of(run_id: str) -> list[str]:
        return [reason for rid, _, reason in errors if rid == run_id]

    def errors_about(text: str) -> list[str]:
        return [reason for _, source, reason in errors if text in (source or "") + (reason or "")]

    # rows lost: rows of the intact folder, and the first rows of the edited sealed folders
    now = table_row_counts(warehouse, folders["intact"])
    result.rows_lost = sum(max(0, n - now.get(k, 0)) for k, n in intact_rows.items())
    for name, rows in first_rows.items():
        later = table_row_counts(warehouse, folders[name])
        result.rows_lost += sum(max(0, n - later.get(k, 0)) for k, n in rows.items())

    trace_text = trace_all(p, run_ids)
    outputs = all_outputs(p, trace_text)
    result.outside_published = sorted(k for k, t in outputs.items() if MARKER in t)
    result.secrets_published = sorted(k for k, t in outputs.items() if any(s in t for s in SECRETS))

    for name, (fault, _) in FOLDER_CASES.items():
        case = Case(name, fault)
        rid = folders[name]
        errs = errors_of(rid)
        if name in ("cmd.sh links outside", "launch.out links outside",
                    "engine log is a FIFO", "engine log is /dev/zero"):
            case.ok = bool(errs) and not any(MARKER in e for e in errs)
            case.outcome = (f"not followed; {len(errs)} ingest_errors: {errs[0][:90] if errs else '-'}")
        elif name == "secrets from another campaign":
            case.ok = not result.secrets_published
            case.outcome = (f"stored and published redacted; secrets found in {len(result.secrets_published)} outputs")
        elif name in ("NaN and strings in a result file", "arrays of different lengths"):
            point = "chat__c01" if name.startswith("NaN") else "long-shared__c04"
            requests = query_db(warehouse, "select count(*) from raw_bench_requests where run_id = $r "
                                           "and point_id = $p", {"r": rid, "p": point})[0][0]
            medians = query_db(campaign_db, "select count(*) from bench_points where run_id = $r and "
                                            "point_id = $p and ttft_median_s is not null",
                             {"r": rid, "p": point})[0][0] if has_column(campaign_db, "bench_points", "ttft_median_s") else 0
            case.ok = bool(errs) and requests == 0 and medians == 0
            case.outcome = (f"{len(errs)} ingest_errors, {requests} requests kept, "
                            f"{medians} medians published for {point}")
        elif name == "compressed engine log":
            facts = sum(n for k, n in table_row_counts(warehouse, rid).items() if k.startswith("raw_log_facts:"))
            want = sum(n for k, n in intact_rows.items() if k.startswith("raw_log_facts:"))
            case.ok = facts == want and facts > 0
            case.outcome = f"read: {facts} engine log facts (the plain log gives {want})"
        elif name == "duplicate keys in launch.out":
            dup = [e for e in errs if "engine_kv_tokens" in e]
            case.ok = bool(dup)
            case.outcome = dup[0][:120] if dup else "NOT RECORDED"
        result.cases.append(case)

    case = Case("run folder linked from outside", "data/runs/<run> is a symbolic link to a folder "
                "outside the project")
    case.ok = folders[case.name] not in run_ids and MARKER not in "".join(outputs.values())
    case.outcome = "refused, not ingested" if case.ok else "INGESTED"
    result.cases.append(case)

    for i, name in enumerate(HOSTILE_NAMES):
        case = Case(f"script in a folder name {i + 1}", f"a run folder named {name!r}")
        case.ok = name not in run_ids
        case.outcome = ("refused at ingest: not a run id" if case.ok else "ingested as a run")
        result.cases.append(case)

    for suffix in (".bak", " (copy)"):
        name = f"copied folder named *{suffix}"
        case = Case(name, f"a copy of a run folder named <run id>{suffix}")
        case.ok = folders[name] not in run_ids
        case.outcome = "refused: not a run id, not counted twice" if case.ok else "COUNTED AS A RUN"
        result.cases.append(case)

    for name in ("edited after sealing, size and mtime kept", "manifest rewritten to match an edit"):
        rid = folders[name]
        case = Case(name, "launch.out edited after the first ingest" + (
            ", size and mtime restored" if "kept" in name else ", MANIFEST.sha256 rewritten to match"))
        value = query_db(warehouse, "select value from raw_launch_out where run_id = $r and key = $k",
                         {"r": rid, "k": "engine_kv_tokens" if "kept" in name else "ready_s"})
        first_value = "16384" if "kept" in name else "37.2"
        marked = marked_tampered(campaign_db, rid)
        shown = any("tamper" in t.lower() and rid in t for k, t in outputs.items()
                    if k.startswith("data/site/"))
        case.ok = [v for (v,) in value] == [first_value] and marked and shown
        case.outcome = (f"first value kept ({value[0][0] if value else '-'}); "
                        f"{'marked tampered' if marked else 'NOT MARKED'}"
                        f"{', shown on the site' if shown else ', NOT ON THE SITE'}")
        result.cases.append(case)

    case = Case("folder arrives unsealed", "a run folder without MANIFEST.sha256")
    folder = p.runs / folders[case.name]
    case.ok = (folder / "MANIFEST.sha256").is_file()
    case.outcome = "sealed at first ingest" if case.ok else "still unsealed"
    result.cases.append(case)

    if browse is not None:
        progress("loading the built pages in headless Chromium")
        # The pages a hostile value could reach: every page that holds one in any escaping.
        site = p.root / "data" / "site"
        pages = [f for f in sorted(site.rglob("*.html"))
                 if f.parent == site or "alert" in f.read_text(errors="replace")]
        seen = browse(p.root / "data" / "site", pages)
        result.scripts_run = seen["scripts"]
        result.pages_browsed = seen["pages"]

    progress("settings a careless user could give")
    before = tree_digest(p.runs)
    result.cases += [overlap_case(p, "site", "data/runs"), overlap_case(p, "docs", "data"),
                     overlap_case(p, "site", "."), concurrent_case(p, "ingest"), concurrent_case(p, "derive"),
                     concurrent_case(p, "render"), dry_run_case(p)]
    result.cases += [bad_params_case(p, name, edit) for name, edit in BAD_PARAMS.items()]
    after = tree_digest(p.runs)
    result.runs_changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    result.seconds = time.perf_counter() - t0
    make_writable(workdir)
    return result


def _check(proc: subprocess.CompletedProcess, step: str) -> None:
    if proc.returncode != 0:
        raise RuntimeError(f"{step} failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")

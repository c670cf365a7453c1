"""`make reliability`: faults injected on purpose, what the pipeline did, and that nothing was lost.

Two parts. (1) Damaged run folders: copies of a real, sealed run folder, each damaged one way
(a truncated or corrupt result file, an empty or NUL-filled engine log, a crashed launch, files
missing, a file edited after the run), are ingested beside the intact original. For each case the
report gives the rows read, the ingest_errors recorded, and the rows LOST: rows of undamaged
files that the damage made disappear (must be zero). (2) The fault tests of the suite (engine
killed mid-sweep, interrupts, process-group clean-up, secrets, path traversal, property-based
parser tests) run under pytest; the report lists each case with its outcome and, for the
property tests, how many generated inputs were tried. (3) Hostile and careless inputs
(stages/tools/faults/hostile.py): links out of the project, FIFOs, script in folder names, secrets from another
campaign, edits after sealing, outputs pointed at the raw runs, two commands at once, impossible
params; the built pages are loaded in headless Chromium, which must run no script of theirs. (4) Crash
and disk faults (stages/tools/faults/crash.py): every stage that writes is killed at many instants and
starved by failing writes (libfiu), and its outputs must be the old or the new ones whole.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import duckdb

from stages.tools.faults import crash
from stages.tools.faults import hostile

FIXTURE = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "runs"
FAULT_TESTS = ["tests/test_parsers_property.py", "tests/test_engine_faults.py",
               "tests/test_engine.py", "tests/test_secrets.py", "tests/test_ingest.py",
               "tests/test_trace.py", "tests/test_run.py", "tests/test_ingest_hostile.py",
               "tests/test_seal.py", "tests/test_render_hostile.py", "tests/test_config.py",
               "tests/test_locks.py"]


def _writable(folder: Path) -> None:
    """Undo a seal on a copy (its folders are read-only too), so the copy can be damaged."""
    for p in [folder, *folder.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


CASES: dict[str, tuple[str, Callable[[Path], list[str]]]] = {
    "truncated result file": ("bench/chat__c01.json cut in half",
                              lambda f: (_truncate(f / "bench/chat__c01.json"), ["bench/chat__c01.json"])[1]),
    "corrupt result file": ("bench/long-shared__c04.json overwritten with junk",
                            lambda f: ((f / "bench/long-shared__c04.json").write_bytes(b"{\"completed\": oops\x00\xff"),
                                       ["bench/long-shared__c04.json"])[1]),
    "empty engine log": ("server.log emptied", lambda f: ((f / "server.log").write_bytes(b""), ["server.log"])[1]),
    "NUL bytes in engine log": ("4 KB of NUL bytes spliced into the middle of server.log",
                                lambda f: (_splice_nul(f / "server.log"), ["server.log"])[1]),
    "crashed launch": ("only cmd.sh and server.log left, the log cut before readiness",
                       lambda f: _crash(f)),
    "no meta.json": ("meta.json removed (spec recovered from the run id and cmd.sh)",
                     lambda f: ((f / "meta.json").unlink(), ["meta.json"])[1]),
    "edited after the run": ("one line of launch.out changed after the run was sealed",
                             lambda f: (_edit(f / "launch.out"), ["launch.out"])[1]),
    "truncated metrics snapshot": ("bench/chat__c01.metrics.after.txt cut mid-line",
                                   lambda f: (_truncate(f / "bench/chat__c01.metrics.after.txt", 0.37),
                                              ["bench/chat__c01.metrics.after.txt"])[1]),
}


def _splice_nul(path: Path) -> None:
    data = path.read_bytes()
    mid = len(data) // 2
    path.write_bytes(data[:mid] + b"\0" * 4096 + data[mid:])


def _edit(path: Path) -> None:
    path.write_text(path.read_text().replace("status=ready", "status=ready ", 1))


def _crash(folder: Path) -> list[str]:
    damaged = []
    for p in sorted(folder.iterdir()):
        if p.name not in ("cmd.sh", "server.log"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
            damaged.append(p.name)
    log = folder / "server.log"
    text = log.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(text) if "KV cache size" in line)
    log.write_text("".join(text[:cut]) + "(EngineCore pid=1) ERROR 11-30 05:36:30 [core.py:1] "
                   "RuntimeError: CPU out of memory while allocating the KV cache\n")
    return damaged + ["server.log"]


@dataclass
class CaseResult:
    name: str
    fault: str
    rows_intact: int
    rows_damaged: int
    rows_lost: int
    errors: list[str]
    outcome: str


def _rows_by_file(db: Path, run_id: str) -> dict[str, int]:
    """Rows of the run's file tables, by the file they came from."""
    from stages.ingest.rows import FILE_TABLES

    counts: dict[str, int] = {}
    with duckdb.connect(str(db), read_only=True) as con:
        for t in FILE_TABLES:
            for f, n in con.execute(f"select source_file, count(*) from {t} where run_id = $r "
                                    "group by source_file", {"r": run_id}).fetchall():
                counts[f] = counts.get(f, 0) + n
    return counts


def damaged_folders(workdir: Path) -> list[CaseResult]:
    from stages.ingest import stage as ingest

    source = next(p for p in FIXTURE.iterdir() if p.is_dir())
    run_id = source.name
    results = []
    for name, (fault, damage) in CASES.items():
        root = workdir / re.sub(r"\W+", "-", name)
        folder = root / "data" / "runs" / run_id
        shutil.copytree(source, folder)
        _writable(folder)
        intact = root / "intact.duckdb"
        ingest.run(runs_dir=folder.parent, warehouse=intact, root=root)
        before = _rows_by_file(intact, run_id)
        touched = damage(folder)
        hurt = [f"data/runs/{run_id}/{t}" for t in touched]
        damaged_db = root / "damaged.duckdb"
        ingest.run(runs_dir=folder.parent, warehouse=damaged_db, root=root)
        after = _rows_by_file(damaged_db, run_id)
        with duckdb.connect(str(damaged_db), read_only=True) as con:
            errors = [f"{f}:{line if line is not None else '-'} {reason}" for f, line, reason in con.execute(
                "select source_file, source_line, reason from ingest_errors order by all").fetchall()]
            recovered = con.execute("select bool_or(recovered) from raw_runs").fetchone()[0]
        kept = {f: n for f, n in before.items()
                if not any(f == h or f.startswith(h + "/") for h in hurt)}
        lost = sum(max(0, n - after.get(f, 0)) for f, n in kept.items())
        outcome = ("read what was left" + (", spec recovered" if recovered else "")
                   + (f", {len(errors)} ingest_errors" if errors else ", no error to record"))
        results.append(CaseResult(name, fault, sum(before.values()), sum(after.values()), lost,
                                  errors, outcome))
    return results


PARSER_EXAMPLES = 1200   # per property test of the parsers: over 10,000 generated inputs in all


def fault_tests(root: Path, junit: Path) -> tuple[list[dict], dict[str, int]]:
    """Run the fault tests; the cases with outcomes, and generated inputs per property test."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
           "--hypothesis-show-statistics", *FAULT_TESTS]
    env = {**os.environ, "PARSER_EXAMPLES": str(PARSER_EXAMPLES)}
    out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)
    cases = []
    for tc in ET.parse(junit).getroot().iter("testcase"):
        status = "passed"
        for tag in ("failure", "error", "skipped"):
            found = tc.find(tag)
            if found is not None:
                status = {"failure": "FAILED", "error": "ERROR", "skipped": "skipped"}[tag]
                said = " ".join((found.get("message") or "").split())[:300]
                status += f" ({said})" if said and tag != "skipped" else ""
        cases.append({"test": f"{tc.get('classname', '').split('.')[-1]}::{tc.get('name')}",
                      "seconds": float(tc.get("time", 0)), "outcome": status})
    examples: dict[str, int] = {}
    current = None
    for line in out.stdout.splitlines():
        m = re.match(r"^(tests/\S+::\S+):", line.strip())
        if m:
            current = m.group(1).split("::")[-1]
        m = re.search(r"(\d+) passing examples?, (\d+) failing", line)
        if m and current:
            examples[current] = examples.get(current, 0) + int(m.group(1)) + int(m.group(2))
    return cases, examples


def browse(site_dir: Path, pages: list[Path]) -> dict[str, int]:
    """Scripts of a built site's data that run: inline handlers and javascript: URLs anywhere in
    the site (a static scan), and, with each of `pages` loaded in headless Chromium and every link
    and handler-bearing element hovered and focused, each dialog call, handler and script URL
    (the browser test's own probe, tests/helpers/site_browser.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
    from helpers.site_browser import Browser, SiteServer, find_chromium, static_scan

    binary = find_chromium()
    if binary is None:
        raise RuntimeError("headless Chromium not found: install Debian's chromium package")
    scripts = len(static_scan(site_dir))
    with SiteServer(site_dir) as server, Browser(binary) as browser:
        tab = browser.page()
        tab.trap_dialogs()
        for page in pages:
            tab.goto(server.base + page.relative_to(site_dir).as_posix())
            seen = tab.provoke()
            scripts += len(seen["fired"]) + len(seen["handlers"]) + len(seen["scriptUrls"])
        scripts += len(tab.dialogs())
    return {"pages": len(pages), "scripts": scripts}


def next_sweep_offset(out_dir: Path) -> int:
    """Where this run's sweep starts: one on from the last whole run's (its report.json), so that
    crash.SWEEP_STRIDE runs in a row fault every open and write of ingest with both errors."""
    try:
        last = json.loads((out_dir / "report.json").read_text())["crash"]["sweep"]["offset"]
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    return (int(last) + 1) % crash.SWEEP_STRIDE


def crash_section(results: list[crash.StageResult], sweep_offset: int = 0) -> list[str]:
    """The report's section on crash and disk faults: per stage, then every case that did not hold."""
    cs = crash.summary(results)
    lines = ["## Crash and disk faults", "",
             "Each stage runs on a scratch project; its process group is killed (SIGKILL) at instants",
             "spread over its run, by time and at the N-th write or fsync, or one write, fsync or open",
             "fails with ENOSPC or EIO (libfiu), or the runs folder vanishes or is read-only mid-stage;",
             f"ingest's sweep makes the storage read-only (EROFS) or full (ENOSPC) at every {crash.SWEEP_STRIDE}th open",
             f"and write of its uninterrupted run from #{1 + sweep_offset} (the next run starts one later).",
             "Then every output is checked (old or new whole, run folders byte for byte, locks), and the",
             "stage runs again: its outputs must match an uninterrupted run's.", "",
             "| stage | uninterrupted run (s) | opens, writes | kill instants | disk faults | input faults "
             "| sweep faults | not whole | run folders changed | re-runs differing | wrong stops "
             "| slowest recovery (s) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        c = r.cases
        lines.append(
            f"| {r.stage} | {r.seconds:.1f} | {r.calls.get('open', '-')}, {r.calls.get('write', '-')} "
            f"| {sum(1 for x in c if x.kind.startswith('kill') and x.fired)} "
            f"| {sum(1 for x in c if x.kind == 'disk' and x.fired)} | {sum(1 for x in c if x.kind == 'input' and x.fired)} "
            f"| {sum(1 for x in c if x.kind == 'sweep' and x.fired)} "
            f"| {sum(len(x.not_whole) for x in c)} | {sum(len(x.runs_changed) for x in c)} "
            f"| {sum(x.rerun_differs for x in c)} | {sum(bool(x.bad_stop) for x in c)} "
            f"| {max((x.recovery_s for x in c), default=0):.1f} |")
    lines += ["", f"- cases tried: {cs['cases']}, outputs checked: {cs['outputs_checked']}",
              f"- kill instants: **{cs['kill_instants']}**, disk faults: **{cs['disk_faults']}**, "
              f"input faults: {cs['input_faults']}, sweep faults: {cs['sweep_faults']}",
              f"- outputs not whole: **{cs['not_whole']}**, run folders changed: **{cs['runs_changed']}**, "
              f"locks left held: **{cs['locks_held']}**, re-runs differing: **{cs['reruns_differing']}**, "
              f"stops without one clear line: **{cs['bad_stops']}**"]
    bad = [x for r in results for x in r.cases if not x.ok]
    if bad:
        lines += ["", "Cases that did not hold:", ""]
        lines += [f"- {x.stage} {x.kind} `{x.plan}`: not whole {x.not_whole}, runs changed "
                  f"{x.runs_changed[:3]}, locks {x.locks_held}, left {x.leftovers}, stop "
                  f"{x.bad_stop!r}, re-run differs {x.rerun_differs}" for x in bad[:40]]
    stops = sorted({x.stopped for r in results for x in r.cases if x.kind != "kill" and x.stopped.startswith("campaign:")})
    lines += ["", "Lines the faults stopped the stages with (a sample):", ""]
    lines += [f"- `{s.replace('`', '')[:200]}`" for s in stops[:8]]
    return lines


def run(*, root: Path, out_dir: Path, progress=lambda s: None) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="campaign-reliability-") as tmp:
        progress("damaging copies of a real run folder and ingesting them")
        cases = damaged_folders(Path(tmp))
        progress("hostile and careless inputs, through ingest, derive, render and Chromium")
        hostile_result = hostile.run(Path(tmp) / "hostile", browse=browse, progress=progress)
        progress("crash and disk faults: every stage killed and starved (two stages at a time)")
        sweep_offset = next_sweep_offset(out_dir)
        crashes = crash.run(Path(tmp) / "crash", workers=2, sweep_offset=sweep_offset, progress=progress)
        progress("running the fault tests (the real engine is killed once: about a minute)")
        tests, examples = fault_tests(root, Path(tmp) / "junit.xml")
    lost = sum(c.rows_lost for c in cases)
    cs = crash.summary(crashes)
    failed = [t for t in tests if t["outcome"].startswith(("FAILED", "ERROR"))]
    lines = [
        "# Reliability report", "",
        f"Made {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `make reliability` "
        f"in {time.perf_counter() - t0:.0f} s.", "",
        "## Damaged run folders", "",
        "Each case damages a copy of a real, sealed run folder and ingests it. *Lost* counts rows of",
        "undamaged files that the damage made disappear.", "",
        "| case | fault injected | rows (intact) | rows (damaged) | rows lost | outcome |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for c in cases:
        lines.append(f"| {c.name} | {c.fault} | {c.rows_intact} | {c.rows_damaged} | {c.rows_lost} | {c.outcome} |")
    lines += ["", "What ingest recorded for each:", ""]
    for c in cases:
        lines.append(f"- **{c.name}**: " + ("; ".join(c.errors[:3]) or "nothing unreadable"))
    h = hostile_result
    lines += ["", "## Hostile and careless inputs", "",
              "A scratch project holds the intact run folder and copies damaged on purpose; the real",
              "commands run on it, and the built pages are loaded in headless Chromium.", "",
              "| case | fault | outcome | held |", "| --- | --- | --- | --- |"]
    for c in h.cases:
        lines.append(f"| {c.name} | {c.fault} | {c.outcome.replace('|', '/')} | {'yes' if c.ok else '**NO**'} |")
    lines += ["", f"- rows lost: **{h.rows_lost}**",
              f"- files published from outside the project: **{len(h.outside_published)}**"
              + (f" ({', '.join(h.outside_published[:5])})" if h.outside_published else ""),
              f"- outputs holding a secret (site, docs, warehouse, facts, trace): "
              f"**{len(h.secrets_published)}**"
              + (f" ({', '.join(h.secrets_published[:5])})" if h.secrets_published else ""),
              f"- scripts that ran in Chromium: **{h.scripts_run}** over {h.pages_browsed} pages",
              f"- run folders changed by the commands: **{len(h.runs_changed)}**",
              f"- {len(h.cases)} cases in {h.seconds:.0f} s, {sum(not c.ok for c in h.cases)} did not hold"]
    lines += ["", *crash_section(crashes, sweep_offset)]
    lines += ["", "## Fault tests", "",
              f"{len(tests)} cases, {len(tests) - len(failed)} passed, {len(failed)} failed; "
              f"{sum(examples.values())} generated inputs across {len(examples)} property tests.", "",
              "| test | outcome | seconds | generated inputs |", "| --- | --- | ---: | ---: |"]
    for t in tests:
        name = t["test"].split("::")[-1].split("[")[0]
        lines.append(f"| {t['test']} | {t['outcome']} | {t['seconds']:.1f} | {examples.get(name, '')} |")
    lines += ["", "## Summary", "",
              f"- damaged folders: {len(cases)} cases, rows lost: **{lost}**",
              f"- hostile inputs: {len(h.cases)} cases, {sum(not c.ok for c in h.cases)} did not "
              f"hold; rows lost **{h.rows_lost}**, files from outside published "
              f"**{len(h.outside_published)}**, secrets **{len(h.secrets_published)}**, "
              f"scripts run **{h.scripts_run}**",
              f"- fault tests: {len(tests)} cases, failed: **{len(failed)}**",
              f"- generated parser inputs: {sum(examples.values())}",
              f"- crash and disk faults: {cs['kill_instants']} kill instants, {cs['disk_faults']} "
              f"disk faults, {cs['sweep_faults']} sweep faults (from #{1 + sweep_offset}, every "
              f"{crash.SWEEP_STRIDE}th); outputs not whole **{cs['not_whole']}**, run folders changed "
              f"**{cs['runs_changed']}**, re-runs differing **{cs['reruns_differing']}**"]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines) + "\n")
    (out_dir / "report.json").write_text(json.dumps({
        "cases": [c.__dict__ for c in cases], "tests": tests, "generated_inputs": examples,
        "rows_lost": lost, "tests_failed": len(failed),
        "hostile": {"cases": [c.__dict__ for c in h.cases], "rows_lost": h.rows_lost,
                    "outside_published": h.outside_published,
                    "secrets_published": h.secrets_published, "scripts_run": h.scripts_run,
                    "pages_browsed": h.pages_browsed, "runs_changed": h.runs_changed},
        "crash": {"summary": cs, "sweep": {"stride": crash.SWEEP_STRIDE, "offset": sweep_offset},
                  "stages": [{"stage": r.stage, "seconds": r.seconds, "calls": r.calls,
                                             "cases": [c.__dict__ for c in r.cases]} for r in crashes]},
    }, indent=2))
    return report

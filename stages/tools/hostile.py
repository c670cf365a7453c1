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

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import duckdb
import yaml

PROJECT = Path(__file__).resolve().parents[2]
FIXTURE = PROJECT / "tests" / "fixtures" / "runs"
# Text only a file outside the project holds; it must never reach an output.
MARKER = "OUTSIDE-THE-PROJECT-7c1e0b"
# Secrets as another campaign's run folder might carry them.
SECRETS = ("hf_Reliab1lityT0kenAbcdefgh", "sk-reliability0123456789abcdef", "hunter2-reliability",
           "hf-override-secret-77")
# Folder names that carry script: a Markdown link with an event handler, a javascript: link.
HOSTILE_NAMES = (
    'tiny[x](mailto:a onmouseover=alert(1);")__cpu_seqs4__4k__vllm__1129-000007',
    "tiny[y](javascript:alert(2))__cpu_seqs4__4k__vllm__1129-000008",
    'tiny<img src=x onerror=alert(3)>__cpu_seqs4__4k__vllm__1129-000009',
)
CLI_TIMEOUT_S = 300

Browse = Callable[[Path, list[Path]], dict[str, int]]


@dataclass
class Case:
    name: str
    fault: str
    outcome: str = ""
    ok: bool = False


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


def _run_id(n: int) -> str:
    """A valid run id for the n-th hostile copy of the fixture."""
    return f"tiny-llama__cpu_seqs4__4k__vllm__1130-06{n:04d}"


def _writable(folder: Path) -> None:
    os.chmod(folder, 0o755)
    for p in folder.rglob("*"):
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)


def _copy_fixture(dest: Path) -> Path:
    source = next(p for p in sorted(FIXTURE.iterdir()) if p.is_dir())
    shutil.copytree(source, dest)
    _writable(dest)
    return dest


def _unseal(folder: Path) -> None:
    (folder / "MANIFEST.sha256").unlink(missing_ok=True)


def _manifest(folder: Path) -> None:
    lines = []
    for p in sorted(q for q in folder.rglob("*") if q.is_file() and q.name != "MANIFEST.sha256"):
        lines.append(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(folder).as_posix()}")
    (folder / "MANIFEST.sha256").write_text("\n".join(lines) + "\n")


def _replace_same_size(path: Path, old: str, new: str) -> None:
    """Edit a file in place keeping its size and its modification time."""
    assert len(old) == len(new)
    st = path.stat()
    path.chmod(0o644)
    path.write_text(path.read_text().replace(old, new, 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _tree_digest(folder: Path) -> dict[str, str]:
    """Every entry under folder (links as their target text, not followed) -> a digest."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_fifo():
            out[rel] = "fifo"
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[rel] = "dir"
    return out


# ---------------------------------------------------------------- the scratch project

class Project:
    def __init__(self, root: Path):
        self.root = root
        self.runs = root / "data" / "runs"
        self.outside = root.parent / "outside"

    def params(self) -> dict[str, Any]:
        return yaml.safe_load((self.root / "params.yaml").read_text())

    def write_params(self, params: dict[str, Any]) -> None:
        (self.root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    def cli(self, *args: str, timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
        """`campaign ARGS` in the project; a command that hangs is killed and exits 124."""
        argv = [sys.executable, "-m", "stages.cli", *args, "--root", str(self.root)]
        try:
            return subprocess.run(argv, cwd=self.root, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", f"still running after {timeout:.0f} s: killed")

    def spawn(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "stages.cli", *args, "--root", str(self.root)],
                                cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def make_project(workdir: Path) -> Project:
    root = workdir / "project"
    root.mkdir(parents=True)
    shutil.copy(PROJECT / "params.yaml", root / "params.yaml")
    shutil.copy(PROJECT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(PROJECT / "site", root / "site")
    project = Project(root)
    project.runs.mkdir(parents=True)
    project.outside.mkdir()
    (project.outside / "passwd").write_text(f"root:x:0:0:{MARKER}:/root:/bin/bash\n")
    (project.outside / "launch.out").write_text(f"status=ready {MARKER}\n")
    return project


# ---------------------------------------------------------------- damaged folders

def _link_cmd(p: Project, f: Path) -> None:
    (f / "cmd.sh").unlink()
    (f / "cmd.sh").symlink_to(p.outside / "passwd")


def _link_launch_out(p: Project, f: Path) -> None:
    (f / "launch.out").unlink()
    (f / "launch.out").symlink_to(p.outside / "launch.out")


def _fifo_log(p: Project, f: Path) -> None:
    (f / "server.log").unlink()
    os.mkfifo(f / "server.log")


def _dev_zero_log(p: Project, f: Path) -> None:
    (f / "server.log").unlink()
    (f / "server.log").symlink_to("/dev/zero")


def _secrets(p: Project, f: Path) -> None:
    hf, sk, password, override = SECRETS
    _unseal(f)
    cmd = (f / "cmd.sh").read_text().splitlines()
    cmd[-1] = (f"HF_TOKEN={hf} MY_PASSWORD={password} " + cmd[-1] + f" --api-key {sk}"
               + f" --hf-overrides '{{\"hf_token\": \"{override}\"}}'")
    (f / "cmd.sh").write_text("\n".join(cmd) + "\n")
    with (f / "server.log").open("a") as log:
        log.write(f"(APIServer pid=1) INFO 11-30 05:37:20 [api_server.py:1] args: api_key='{sk}' "
                  f"hf_token='{hf}'\n")
    meta = json.loads((f / "meta.json").read_text())
    meta["spec_params"]["args"]["--api-key"] = sk
    meta["image"] = f"registry.invalid/vllm:{hf}"
    (f / "meta.json").write_text(json.dumps(meta, indent=2))


def _nan_and_strings(p: Project, f: Path) -> None:
    path = f / "bench" / "chat__c01.json"
    data = json.loads(path.read_text())
    data["ttfts"][0] = float("nan")
    data["completed"] = "two"
    path.write_text(json.dumps(data))


def _unequal_arrays(p: Project, f: Path) -> None:
    path = f / "bench" / "long-shared__c04.json"
    data = json.loads(path.read_text())
    data["ttfts"] = data["ttfts"][:-1]
    path.write_text(json.dumps(data))


def _gzip_log(p: Project, f: Path) -> None:
    _unseal(f)
    log = f / "server.log"
    (f / "server.log.gz").write_bytes(gzip.compress(log.read_bytes(), mtime=0))
    log.unlink()


def _duplicate_keys(p: Project, f: Path) -> None:
    with (f / "launch.out").open("a") as out:
        out.write("engine_kv_tokens=99999\n")


# name -> (fault, how to damage a fresh copy before the first ingest)
FOLDER_CASES: dict[str, tuple[str, Callable[[Project, Path], None]]] = {
    "cmd.sh links outside": ("cmd.sh is a symbolic link to a password file outside the project",
                             _link_cmd),
    "launch.out links outside": ("launch.out is a symbolic link to a file outside the project",
                                 _link_launch_out),
    "engine log is a FIFO": ("server.log is a named pipe nobody writes to", _fifo_log),
    "engine log is /dev/zero": ("server.log is a link to /dev/zero, endless", _dev_zero_log),
    "secrets from another campaign": (
        "HF_TOKEN, a password, --api-key and a token inside --hf-overrides in cmd.sh, echoed in "
        "server.log and meta.json; the folder arrives unsealed", _secrets),
    "NaN and strings in a result file": ("a TTFT of NaN and `completed: \"two\"` in a result file",
                                         _nan_and_strings),
    "arrays of different lengths": ("one TTFT fewer than the other per-request arrays",
                                    _unequal_arrays),
    "compressed engine log": ("server.log stored as server.log.gz; the folder arrives unsealed",
                              _gzip_log),
    "duplicate keys in launch.out": ("engine_kv_tokens given twice with different values",
                                     _duplicate_keys),
}


def damage_folders(p: Project) -> dict[str, str]:
    """Write the intact fixture and every damaged copy; case name -> run folder name."""
    folders = {"intact": _copy_fixture(p.runs / _run_id(0)).name}
    for n, (name, (_, damage)) in enumerate(FOLDER_CASES.items(), start=1):
        folder = _copy_fixture(p.runs / _run_id(n))
        damage(p, folder)
        folders[name] = folder.name
    n = len(FOLDER_CASES) + 1
    linked = _copy_fixture(p.outside / _run_id(n))
    (linked / "cmd.sh").write_text(f"#!/bin/sh\n# {MARKER}\nvllm serve m\n")
    _manifest(linked)
    (p.runs / linked.name).symlink_to(linked, target_is_directory=True)
    folders["run folder linked from outside"] = linked.name
    for i, name in enumerate(HOSTILE_NAMES):
        _copy_fixture(p.runs / name)
        folders[f"script in a folder name {i + 1}"] = name
    for suffix in (".bak", " (copy)"):
        _copy_fixture(p.runs / (_run_id(0) + suffix))
        folders[f"copied folder named *{suffix}"] = _run_id(0) + suffix
    for n, name in ((n + 1, "edited after sealing, size and mtime kept"),
                    (n + 2, "manifest rewritten to match an edit"),
                    (n + 3, "folder arrives unsealed")):
        folder = _copy_fixture(p.runs / _run_id(n))
        if name == "folder arrives unsealed":
            _unseal(folder)
        folders[name] = folder.name
    return folders


def tamper(p: Project, folders: dict[str, str]) -> None:
    """After the first ingest: edit two sealed folders, one also rewriting its manifest."""
    kept = p.runs / folders["edited after sealing, size and mtime kept"]
    os.chmod(kept, 0o755)
    _replace_same_size(kept / "launch.out", "engine_kv_tokens=16384", "engine_kv_tokens=96384")
    rewritten = p.runs / folders["manifest rewritten to match an edit"]
    _writable(rewritten)
    _replace_same_size(rewritten / "launch.out", "ready_s=37.2", "ready_s=99.9")
    _manifest(rewritten)


# ---------------------------------------------------------------- what came out

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


def _rows(db: Path, run_id: str) -> dict[str, int]:
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


def _query(db: Path, sql: str, params: dict | None = None) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or {}).fetchall()


def _outputs(p: Project, trace_text: str) -> dict[str, str]:
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


def _trace_all(p: Project, run_ids: set[str]) -> str:
    """`campaign trace` of every published fact about the given runs, in one process."""
    from stages.render import trace
    from stages.core.config import Paths, load_params

    params = load_params(p.root)
    paths = Paths.from_params(params, p.root)
    facts = trace.load_facts(paths.facts)
    chunks = [trace.chain(f, paths) for f in facts if run_ids & set(f.get("run_ids") or [])]
    return "\n".join(chunks)


# ---------------------------------------------------------------- settings a user gets wrong

def _one_line_refusal(proc: subprocess.CompletedProcess) -> bool:
    err = proc.stderr.strip().splitlines()
    return proc.returncode == 2 and bool(err) and "Traceback" not in proc.stderr


def _overlap_case(p: Project, key: str, value: str) -> Case:
    case = Case(f"{key} is {value}", f"params.yaml paths.{key} set to {value}, then `campaign render`")
    before = _tree_digest(p.runs)
    original = (p.root / "params.yaml").read_text()
    params = p.params()
    params["paths"][key] = value
    p.write_params(params)
    try:
        proc = p.cli("render")
    finally:
        (p.root / "params.yaml").write_text(original)
    same = _tree_digest(p.runs) == before
    case.ok = _one_line_refusal(proc) and same
    case.outcome = (f"refused (exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else ''})"
                    + ("; every run folder unchanged" if same else "; RUN FOLDERS CHANGED"))
    return case


BAD_PARAMS: dict[str, Callable[[dict], None]] = {
    "unknown profile": lambda q: q.update(profile="h100x16"),
    "zero concurrency": lambda q: q["workloads"]["local-cpu"]["chat"].update(concurrency=[0, 2]),
    "negative concurrency": lambda q: q["workloads"]["local-cpu"]["chat"].update(concurrency=[-4]),
    "prompt longer than the context": lambda q: q["workloads"]["local-cpu"]["long"].update(
        prompt_tokens=8192),
    "spec name with ../": lambda q: (q["specs"].update({"../escape": q["specs"]["tiny-seqs4"]}),
                                     q.update(run_specs=["../escape"])),
    "spec name with $(...)": lambda q: (q["specs"].update({"x$(touch pwned)": q["specs"]["tiny-seqs4"]}),
                                        q.update(run_specs=["x$(touch pwned)"])),
    "spec without a model": lambda q: q["specs"]["tiny-seqs4"].pop("model"),
}


def _bad_params_case(p: Project, name: str, edit: Callable[[dict], None]) -> Case:
    case = Case(f"params: {name}", f"params.yaml with {name}, then `campaign derive`")
    original = (p.root / "params.yaml").read_text()
    params = p.params()
    edit(params)
    p.write_params(params)
    try:
        proc = p.cli("derive")
    finally:
        (p.root / "params.yaml").write_text(original)
    case.ok = _one_line_refusal(proc) and not (p.root / "pwned").exists()
    first = proc.stderr.strip().splitlines()[0][:200] if proc.stderr.strip() else "(nothing on stderr)"
    case.outcome = f"exit {proc.returncode}: {first}"
    return case


def _concurrent_case(p: Project, command: str) -> Case:
    """Two `campaign COMMAND` started together: each either finishes or is refused in one line
    naming the other, and the output is whole."""
    case = Case(f"two `{command}` at once", f"two `campaign {command}` started together")
    procs = [p.spawn(command), p.spawn(command)]
    done = [(proc.returncode, err) for proc in procs for _, err in [proc.communicate(timeout=CLI_TIMEOUT_S)]]
    codes = sorted(code for code, _ in done)
    refusals = [err.strip().splitlines()[-1] for code, err in done if code == 2 and err.strip()]
    clean = all(code in (0, 2) and "Traceback" not in err for code, err in done) and codes[0] == 0
    intact = True
    try:
        if command == "ingest":
            intact = bool(_query(p.root / "data" / "warehouse.duckdb", "select count(*) from raw_runs")[0][0])
        elif command == "derive":
            intact = bool(_query(p.root / "data" / "campaign.duckdb", "select count(*) from runs")[0][0])
        else:
            intact = (p.root / "data" / "site" / "index.html").is_file()
    except duckdb.Error:
        intact = False
    case.ok = clean and intact
    case.outcome = (f"exit codes {codes}"
                    + (f"; the other was told: {refusals[0][:160]}" if refusals else "; they did not overlap")
                    + ("; output whole" if intact else "; OUTPUT DAMAGED"))
    return case


def _dry_run_case(p: Project) -> Case:
    hf, sk, password, override = SECRETS
    case = Case("dry run with secrets", "a spec with MY_PASSWORD in env and a token in "
                "--hf-overrides, then `campaign run --dry-run`")
    original = (p.root / "params.yaml").read_text()
    params = p.params()
    spec = params["specs"]["tiny-seqs4"]
    spec["env"] = {"MY_PASSWORD": password}
    spec["args"]["--hf-overrides"] = json.dumps({"hf_token": override})
    p.write_params(params)
    try:
        proc = p.cli("run", "tiny-seqs4", "--dry-run")
    finally:
        (p.root / "params.yaml").write_text(original)
    shown = [s for s in (password, override) if s in proc.stdout + proc.stderr]
    case.ok = proc.returncode == 0 and not shown
    case.outcome = ("command printed with secrets redacted" if case.ok
                    else f"exit {proc.returncode}, secrets shown: {len(shown)}")
    return case


# ---------------------------------------------------------------- the whole run

def run(workdir: Path, *, browse: Browse | None = None, progress=lambda s: None) -> Result:
    t0 = time.perf_counter()
    result = Result()
    p = make_project(workdir)
    folders = damage_folders(p)

    # The intact folder alone, for the rows every other case must leave standing.
    alone = make_project(workdir / "alone")
    _copy_fixture(alone.runs / folders["intact"])
    _check(alone.cli("ingest"), "ingest of the intact folder")
    intact_rows = _rows(alone.root / "data" / "warehouse.duckdb", folders["intact"])

    progress("ingesting the hostile run folders (first time)")
    first = p.cli("ingest", timeout=120)
    warehouse = p.root / "data" / "warehouse.duckdb"
    first_rows = {name: _rows(warehouse, folders[name]) for name in
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

    run_ids = {r[0] for r in _query(warehouse, "select run_id from raw_runs")}
    errors = _query(warehouse, "select run_id, source_file, reason from ingest_errors")
    campaign_db = p.root / "data" / "campaign.duckdb"

    def errors_of(run_id: str) -> list[str]:
        return [reason for rid, _, reason in errors if rid == run_id]

    def errors_about(text: str) -> list[str]:
        return [reason for _, source, reason in errors if text in (source or "") + (reason or "")]

    # rows lost: rows of the intact folder, and the first rows of the edited sealed folders
    now = _rows(warehouse, folders["intact"])
    result.rows_lost = sum(max(0, n - now.get(k, 0)) for k, n in intact_rows.items())
    for name, rows in first_rows.items():
        later = _rows(warehouse, folders[name])
        result.rows_lost += sum(max(0, n - later.get(k, 0)) for k, n in rows.items())

    trace_text = _trace_all(p, run_ids)
    outputs = _outputs(p, trace_text)
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
            requests = _query(warehouse, "select count(*) from raw_bench_requests where run_id = $r "
                                         "and point_id = $p", {"r": rid, "p": point})[0][0]
            medians = _query(campaign_db, "select count(*) from bench_points where run_id = $r and "
                                          "point_id = $p and ttft_median_s is not null",
                             {"r": rid, "p": point})[0][0] if _has_column(campaign_db, "bench_points", "ttft_median_s") else 0
            case.ok = bool(errs) and requests == 0 and medians == 0
            case.outcome = (f"{len(errs)} ingest_errors, {requests} requests kept, "
                            f"{medians} medians published for {point}")
        elif name == "compressed engine log":
            facts = sum(n for k, n in _rows(warehouse, rid).items() if k.startswith("raw_log_facts:"))
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
        value = _query(warehouse, "select value from raw_launch_out where run_id = $r and key = $k",
                       {"r": rid, "k": "engine_kv_tokens" if "kept" in name else "ready_s"})
        first_value = "16384" if "kept" in name else "37.2"
        marked = _tampered(campaign_db, rid)
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
    before = _tree_digest(p.runs)
    result.cases += [_overlap_case(p, "site", "data/runs"), _overlap_case(p, "docs", "data"),
                     _overlap_case(p, "site", "."), _concurrent_case(p, "ingest"), _concurrent_case(p, "derive"),
                     _concurrent_case(p, "render"), _dry_run_case(p)]
    result.cases += [_bad_params_case(p, name, edit) for name, edit in BAD_PARAMS.items()]
    after = _tree_digest(p.runs)
    result.runs_changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    result.seconds = time.perf_counter() - t0
    _writable_all(workdir)
    return result


def _has_column(db: Path, table: str, column: str) -> bool:
    return bool(_query(db, "select count(*) from information_schema.columns where table_name = $t "
                           "and column_name = $c", {"t": table, "c": column})[0][0])


def _tampered(db: Path, run_id: str) -> bool:
    """Whether the public runs table marks the run tampered (any boolean column named so)."""
    cols = [c for (c,) in _query(db, "select column_name from information_schema.columns where "
                                     "table_name = 'runs' and column_name like '%tamper%'")]
    for col in cols:
        got = _query(db, f'select "{col}" from runs where run_id = $r', {"r": run_id})
        if got and got[0][0] not in (None, False, "", 0):
            return True
    return False


def _check(proc: subprocess.CompletedProcess, step: str) -> None:
    if proc.returncode != 0:
        raise RuntimeError(f"{step} failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")


def _writable_all(workdir: Path) -> None:
    """Sealed folders are read-only; make the scratch tree removable."""
    for dirpath, dirnames, _ in os.walk(workdir):
        for d in dirnames:
            path = Path(dirpath) / d
            if not path.is_symlink():
                os.chmod(path, 0o755)

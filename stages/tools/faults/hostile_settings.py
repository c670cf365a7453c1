"""Settings a careless user could give, tried on the scratch project of the hostile-input run
(hostile.py): outputs pointed at the raw runs, two commands at once, impossible params, a dry run
with secrets. Each is a Case."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Callable

import duckdb

from stages.tools.faults.hostile_folders import CLI_TIMEOUT_S, SECRETS, Project, tree_digest
from stages.tools.faults.hostile_outputs import query_db


@dataclass
class Case:
    name: str
    fault: str
    outcome: str = ""
    ok: bool = False


def _one_line_refusal(proc: subprocess.CompletedProcess) -> bool:
    err = proc.stderr.strip().splitlines()
    return proc.returncode == 2 and bool(err) and "Traceback" not in proc.stderr


def overlap_case(p: Project, key: str, value: str) -> Case:
    """params.yaml with paths.<key> set to `value`, then `campaign render`: refused in one line."""
    case = Case(f"{key} is {value}", f"params.yaml paths.{key} set to {value}, then `campaign render`")
    before = tree_digest(p.runs)
    original = (p.root / "params.yaml").read_text()
    params = p.params()
    params["paths"][key] = value
    p.write_params(params)
    try:
        proc = p.cli("render")
    finally:
        (p.root / "params.yaml").write_text(original)
    same = tree_digest(p.runs) == before
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


def bad_params_case(p: Project, name: str, edit: Callable[[dict], None]) -> Case:
    """params.yaml edited into a wrong shape, then `campaign derive`."""
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


def concurrent_case(p: Project, command: str) -> Case:
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
            intact = bool(query_db(p.root / "data" / "warehouse.duckdb", "select count(*) from raw_runs")[0][0])
        elif command == "derive":
            intact = bool(query_db(p.root / "data" / "campaign.duckdb", "select count(*) from runs")[0][0])
        else:
            intact = (p.root / "data" / "site" / "index.html").is_file()
    except duckdb.Error:
        intact = False
    case.ok = clean and intact
    case.outcome = (f"exit codes {codes}"
                    + (f"; the other was told: {refusals[0][:160]}" if refusals else "; they did not overlap")
                    + ("; output whole" if intact else "; OUTPUT DAMAGED"))
    return case


def dry_run_case(p: Project) -> Case:
    """A dry run with secrets in the environment and settings: none of them is printed."""
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

"""The stages the crash tests stop, each as a scenario: how its scratch project is made (the state
before the command), the command, and the state of each output it may write.

Each scenario's `state(root)` returns output name -> state (crash_outputs), and `judge` says of
each output whether a state seen after a fault is whole, given the states before and after an
uninterrupted run. Run folders are judged apart (crash.py): no file of one may change.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from stages.formats.sealed import RUN_MANIFEST, manifest_text
from stages.formats.launch_out import parse_launch_out
from stages.formats.run_folder import LAUNCH_OUT
from stages.tools.faults import crash_outputs as co
from stages.tools.faults.hostile_folders import Project, copy_fixture

PROJECT = Path(__file__).resolve().parents[3]
RUN_IDS = [f"tiny-llama__cpu_seqs4__4k__vllm__1130-07{n:04d}" for n in range(6)]
IMPORTED = "tiny-llama__cpu_seqs4__4k__vllm__1130-080000"


@dataclass
class Scenario:
    name: str
    args: list[str]                              # the campaign command
    prepare: Callable[[Project], None]           # the state before it, made once
    state: Callable[[Path], dict[str, Any]]      # output -> state
    by_run: tuple[str, ...] = ()                 # outputs judged run by run (whole-folder transactions)
    env: dict[str, str] = field(default_factory=dict)
    # what may be left after a kill that the next run clears (scratch names beside the outputs)
    leftovers: Callable[[Path], list[str]] = lambda root: []
    # armed with libfiu (kills by write count, disk faults); the run stage is not yet: it is
    # killed by time only (torch imports under libfiu's preload; a whole run under it is untried),
    # and its bench/ write faults are tested in tests/test_crash.py
    fiu: bool = True
    once: bool = False       # a second run after a whole one is refused (import): not run again

    def same(self, now: dict[str, Any], after: dict[str, Any]) -> bool:
        """Whether a run made again after a fault left the outputs of an uninterrupted one."""
        return now == after

    def judge(self, name: str, now, before, after) -> bool:
        if name in self.by_run:
            return co.whole_by_run(co.by_run(now), co.by_run(before), co.by_run(after))
        return co.whole(now, before, after)


def _cli(p: Project, *args: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run([sys.executable, "-m", "stages.cli", *args, "--root", str(p.root)],
                          cwd=p.root, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"campaign {' '.join(args)} failed: {proc.stderr.strip()[-600:]}")


def _runs(p: Project, ids: list[str], *, unsealed: tuple[str, ...] = ()) -> None:
    for run_id in ids:
        folder = copy_fixture(p.runs / run_id)
        if run_id in unsealed:
            (folder / RUN_MANIFEST).unlink()


def _hidden(folder: Path) -> list[str]:
    return sorted(e.name for e in folder.iterdir() if e.name.startswith(".")) if folder.is_dir() else []


def _data(root: Path) -> Path:
    return root / "data"


# -------------------------------------------------------------------------- ingest

def prep_ingest(p: Project) -> None:
    _runs(p, RUN_IDS[:2])
    _cli(p, "ingest")
    _runs(p, RUN_IDS[2:4])
    _runs(p, RUN_IDS[4:5], unsealed=(RUN_IDS[4],))


def state_ingest(root: Path) -> dict[str, Any]:
    return {"warehouse": co.db_state(_data(root) / "warehouse.duckdb")}


# -------------------------------------------------------------------------- derive

def prep_derive(p: Project) -> None:
    _runs(p, RUN_IDS[:2])
    _cli(p, "ingest")
    _cli(p, "derive")
    _runs(p, RUN_IDS[2:4])
    _cli(p, "ingest")


def state_derive(root: Path) -> dict[str, Any]:
    d = _data(root)
    return {"campaign.duckdb": co.db_state(d / "campaign.duckdb"),
            "derived": co.tree_state(d / "derived"), "metrics.json": co.file_state(d / "metrics.json")}


def left_derive(root: Path) -> list[str]:
    return [n for n in _hidden(_data(root)) + _hidden(_data(root) / "derived")
            if ".tmp" in n or ".old" in n] + [e.name for e in _data(root).glob("*.tmp-*")]


# -------------------------------------------------------------------------- render

def prep_render(p: Project) -> None:
    prep_derive(p)
    _cli(p, "render")
    _cli(p, "derive")


def state_render(root: Path) -> dict[str, Any]:
    d = _data(root)
    return {"site": co.tree_state(d / "site", stamps=True), "docs": co.tree_state(d / "docs", stamps=True),
            "facts.json": co.file_state(d / "facts.json", stamps=True)}


def left_render(root: Path) -> list[str]:
    return [n for n in _hidden(_data(root)) if n.startswith((".site.", ".docs.", ".facts"))]


# -------------------------------------------------------------------------- import and seal

def prep_import(p: Project) -> None:
    _runs(p, RUN_IDS[:2])
    src = copy_fixture(p.root.parent / "old-campaign" / IMPORTED)
    (src / RUN_MANIFEST).unlink()


def state_import(root: Path) -> dict[str, Any]:
    """The imported folder: absent, or every file of the source byte for byte, sealed (its
    manifest matching its files)."""
    folder = root / "data" / "runs" / IMPORTED
    if not folder.exists():
        return {"imported": "absent"}
    src = co.tree_state(root.parent / "old-campaign" / IMPORTED)
    have = co.tree_state(folder)
    copied = all(have.get(k) == v for k, v in src.items())
    sealed = (folder / RUN_MANIFEST).is_file() and \
        (folder / RUN_MANIFEST).read_text() == manifest_text(folder)
    record = (folder / "import.json").is_file()
    return {"imported": "copied, recorded and sealed" if copied and sealed and record
            else f"PARTIAL (copied {copied}, sealed {sealed}, import.json {record})"}


def left_runs(root: Path) -> list[str]:
    return _hidden(root / "data" / "runs")


def prep_seal(p: Project) -> None:
    _runs(p, RUN_IDS[:3], unsealed=tuple(RUN_IDS[:3]))


def state_seal(root: Path) -> dict[str, Any]:
    """Each folder: unsealed, or sealed with a manifest that lists its files whole."""
    out = {}
    for run_id in RUN_IDS[:3]:
        m = root / "data" / "runs" / run_id / RUN_MANIFEST
        if not m.exists():
            out[run_id] = "unsealed"
        else:
            out[run_id] = "sealed" if m.read_text() == manifest_text(m.parent) else "MANIFEST NOT WHOLE"
    return out


# -------------------------------------------------------------------------- the run stage

STANDIN_PORT = 8071


def _standin_env() -> dict[str, str]:
    fake = PROJECT / "tests" / "fixtures" / "fake_docker"
    return {"FAKE_DOCKER_PYTHON": sys.executable, "FAKE_DOCKER_LOG": os.devnull,
            "PATH": os.pathsep.join([str(fake), str(Path(sys.executable).parent), os.environ["PATH"]])}


def prep_run(p: Project) -> None:
    """A stand-in engine (tests/fixtures/fake_docker) with one small sweep, its model made, and
    one finished run of it already in the runs folder."""
    sys.path.insert(0, str(PROJECT / "tests"))
    from helpers.standin_helpers import standin_profile

    params = p.params()
    params["profile"] = "standin-crash"
    params["profiles"]["standin-crash"] = standin_profile(STANDIN_PORT)
    params["workloads"]["standin-crash"] = {"tiny": {
        "description": "four short points", "prompt_tokens": 64, "output_tokens": 8,
        "concurrency": [1, 2, 3, 4], "prompts_per_user": 2}}
    params["specs"]["crash"] = {"profile": "standin-crash", "model": "tiny-llama", "layout": "crash",
                                "gpus": 1, "est_minutes": 1, "workloads": ["tiny"],
                                "args": {"--max-model-len": 4096}, "gate": {"depths": [0.5]}}
    params["run_specs"] = ["crash"]
    p.write_params(params)
    _cli(p, "model", "tiny-llama", env=_standin_env())
    _cli(p, "run", "crash", env=_standin_env())


def state_run(root: Path) -> dict[str, Any]:
    """The runs the command added: each one's files that exist are whole (meta.json a JSON
    document, launch.out whole key=value lines), and how it ended."""
    out = {}
    for folder in sorted((root / "data" / "runs").iterdir()):
        if folder.name.startswith("."):
            continue
        out[folder.name] = (_run_shape(folder), sorted(co.tree_state(folder)))
    return out


def _run_shape(folder: Path) -> str:
    problems = []
    meta = folder / "meta.json"
    if meta.exists():
        try:
            json.loads(meta.read_text())
        except ValueError:
            problems.append("meta.json not whole")
    facts = {}
    lo = folder / LAUNCH_OUT
    if lo.exists():
        data = lo.read_bytes()
        if data and not data.endswith(b"\n"):
            problems.append("launch.out ends mid-line")
        rows, errors = parse_launch_out(data)
        problems += [f"line {e.line}: {e.reason}" for e in errors]
        facts = {key: value for key, value, _ in rows}
    if problems:
        return "NOT WHOLE: " + "; ".join(problems)
    return f"run_status={facts.get('run_status', '-')}"


def same_run(now: dict[str, Any], after: dict[str, Any]) -> bool:
    """A run made again (the newest folder) ends as the uninterrupted one did, with the same files."""
    return bool(now) and bool(after) and now[max(now)] == after[max(after)]


SCENARIOS: dict[str, Scenario] = {
    s.name: s for s in [
        Scenario("ingest", ["ingest"], prep_ingest, state_ingest, by_run=("warehouse",)),
        Scenario("derive", ["derive"], prep_derive, state_derive, leftovers=left_derive),
        Scenario("render", ["render"], prep_render, state_render, leftovers=left_render),
        Scenario("import", ["import", f"../old-campaign/{IMPORTED}", "--profile", "local-cpu"],
                 prep_import, state_import, leftovers=left_runs, once=True),
        Scenario("seal", ["seal"], prep_seal, state_seal, leftovers=left_runs),
        Scenario("run", ["run", "crash"], prep_run, state_run, env=_standin_env(), leftovers=left_runs,
                 fiu=False),
    ]
}
SCENARIOS["run"].judge = lambda name, now, before, after: "NOT WHOLE" not in str(now)  # type: ignore[method-assign]
SCENARIOS["run"].same = same_run  # type: ignore[method-assign]

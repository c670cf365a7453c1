"""The needle gate end to end, through `campaign run` on stand-in engines (the stand-in docker):
a reasoning model that thinks and answers late passes it; one that answers after the probe's
timeout fails every probe with its reason, and the run still goes on to its benchmarks. Then
`campaign ingest` and `campaign derive` carry both into the public tables.

(The gate prompt of a 1,048,576-token server is checked in tests/test_needle.py.)"""
from __future__ import annotations

import copy
import datetime as dt
import json

import duckdb
import pytest

from helpers.standin_helpers import SHIPPED, launch_facts, project_copy, sh_all, standin_profile

PORT = 8052
THINK_TOKENS = 1500
TIMEOUT_S = 1.0


def gate_params() -> dict:
    """Two stand-in specs with one tiny sweep of two points: `thinker` reasons for THINK_TOKENS
    tokens and answers after a second, with an answer budget that holds its reasoning; `sleeper`
    answers after two seconds, past a probe timeout of TIMEOUT_S."""
    params = copy.deepcopy(SHIPPED)
    params["profile"] = "standin-gate"
    params["profiles"]["standin-gate"] = standin_profile(PORT)
    params["workloads"]["standin-gate"] = {"tiny": {
        "description": "two short points", "prompt_tokens": 64, "output_tokens": 4,
        "concurrency": [1, 2], "prompts_per_user": 1}}
    base = {"profile": "standin-gate", "model": "tiny-llama", "gpus": 1, "est_minutes": 1,
            "workloads": ["tiny"], "args": {"--max-model-len": 4096}}
    params["specs"] |= {
        "thinker": {**base, "layout": "thinker", "gate": {"depths": [0.5], "answer_tokens": 2048},
                    "env": {"STANDIN_THINK_TOKENS": str(THINK_TOKENS), "STANDIN_ANSWER_DELAY_S": "1.2"}},
        "sleeper": {**base, "layout": "sleeper", "env": {"STANDIN_ANSWER_DELAY_S": "2"},
                    "gate": {"depths": [0.25, 0.75], "timeout_base_s": TIMEOUT_S,
                             "min_prefill_tok_s": 1e9, "min_decode_tok_s": 1e9}}}
    params["run_specs"] = ["thinker", "sleeper"]
    return params


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> dict:
    """Both specs run, then ingested and derived, in a copy of the project."""
    root = project_copy(tmp_path_factory.mktemp("gate"), gate_params())
    commands = (["campaign", "model", "tiny-llama"], ["campaign", "run", "thinker"],
                ["campaign", "run", "sleeper"], ["campaign", "ingest"], ["campaign", "derive"])
    outs = sh_all(root, *commands, log=root / "docker.log")
    runs = {cmd[2]: out.stdout + out.stderr for cmd, out in zip(commands, outs) if cmd[1] == "run"}
    folders = {json.loads((f / "meta.json").read_text())["spec"]: f
               for f in (root / "data" / "runs").iterdir()}
    db = duckdb.connect(str(root / "data" / "campaign.duckdb"), read_only=True)
    yield {"root": root, "output": runs, "folders": folders, "db": db}
    db.close()


def niah(folder) -> tuple[list[dict], str]:
    """The probes of niah.log and its GATE line."""
    lines = (folder / "niah.log").read_text().splitlines()
    return [json.loads(line) for line in lines[:-1]], lines[-1]


def rows(db, sql: str, run_id: str) -> list[tuple]:
    return db.execute(sql, [run_id]).fetchall()


def test_a_reasoning_engine_that_thinks_and_answers_late_passes_the_gate(campaign):
    folder = campaign["folders"]["thinker"]
    probes, gate_line = niah(folder)
    assert gate_line == "GATE niah score= 1.0"
    [p] = probes
    assert p["ok"] and p["failure"] is None
    assert p["answer"].strip().isdigit()
    assert p["reasoning_tokens"] >= THINK_TOKENS - 2         # the reasoning block, measured
    assert p["latency_s"] >= 1.2                             # the answer came late
    launch = launch_facts(folder)
    assert (launch["gate_score"], launch["run_status"], launch["points"]) == ("1.0", "complete", "2")

    db, run_id = campaign["db"], folder.name
    assert rows(db, "select score, probes, passed_probes, failed_probes, provisional from gates "
                    "where run_id = ?", run_id) == [(1.0, 1, 1, 0, False)]
    assert rows(db, "select ok, failure, reasoning_tokens from gate_probes where run_id = ?",
                run_id) == [(True, None, p["reasoning_tokens"])]
    assert rows(db, "select bool_or(provisional), count(*) from bench_points where run_id = ?",
                run_id) == [(False, 2)]


def test_an_engine_that_answers_after_the_timeout_fails_every_probe_and_the_run_goes_on(campaign):
    folder = campaign["folders"]["sleeper"]
    probes, gate_line = niah(folder)
    assert gate_line == "GATE niah score= 0.0"
    assert [p["depth"] for p in probes] == [0.25, 0.75]
    for p in probes:
        assert not p["ok"] and p["answer"] == ""
        assert p["timeout_s"] == TIMEOUT_S
        assert p["failure"] == f"no answer within the probe's timeout of {TIMEOUT_S} s (ReadTimeout)"
        assert TIMEOUT_S <= p["latency_s"] < 2
    assert "Traceback" not in campaign["output"]["sleeper"]
    launch = launch_facts(folder)
    assert (launch["gate_score"], launch["run_status"], launch["points"]) == ("0.0", "complete", "2")
    for point in ("tiny__c01", "tiny__c02"):                 # its benchmarks ran, every point
        result = json.loads((folder / "bench" / f"{point}.json").read_text())
        assert result["completed"] == result["num_prompts"] >= 2

    db, run_id = campaign["db"], folder.name
    assert rows(db, "select score, probes, passed_probes, failed_probes, provisional from gates "
                    "where run_id = ?", run_id) == [(0.0, 2, 0, 2, True)]
    failures = rows(db, "select failure from gate_probes where run_id = ? order by probe_idx", run_id)
    assert [f for (f,) in failures] == [p["failure"] for p in probes]
    assert rows(db, "select bool_and(provisional), count(*) from bench_points where run_id = ?",
                run_id) == [(True, 2)]
    assert rows(db, "select run_status from runs where run_id = ?", run_id) == [("complete",)]
    # the engine saw its clients give up; nothing went wrong with the run or the engine
    assert "Aborted request" in (folder / "server.log").read_text()
    assert rows(db, "select event, detail from run_events where run_id = ?", run_id) == []


def test_ready_s_is_when_the_engine_answered_not_when_the_client_had_loaded(campaign):
    """The benchmark client's imports (vLLM's, about 12 s of CPU) load while the engine starts; a
    stand-in engine is up in about a second, long before them, and its ready time is still the
    instant its health check first answered: within the poll's half second and the log's
    one-second stamps of the 'Starting vLLM API server' line it printed."""
    for spec in ("thinker", "sleeper"):
        folder = campaign["folders"][spec]
        times = dict(part.split("=", 1) for part in launch_facts(folder)["engine_times"].split())
        ready = dt.datetime.fromisoformat(times["ready"].replace("Z", "+00:00"))
        start = dt.datetime.fromisoformat(times["start"].replace("Z", "+00:00"))
        line = next(line for line in (folder / "server.log").read_text().splitlines()
                    if "Starting vLLM API server" in line)
        stamp = dt.datetime.strptime(f"{ready.year}-{line.split()[1]} {line.split()[2]}", "%Y-%m-%d %H:%M:%S")
        serving = stamp.astimezone(dt.timezone.utc)      # the stand-in stamps in local time
        assert start - dt.timedelta(seconds=1) <= serving <= ready, (spec, times, line)
        assert (ready - serving).total_seconds() < 3, (spec, times, line)

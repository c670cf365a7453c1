"""Multi-turn workloads (ramp, agents): the log parser, ingest of a run folder, and the public
tables derive builds from them (turn_requests, ramp_turns, agent_runs)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.db_rows import db_tuples
from helpers.derive_rows import RULES, WORKLOADS, raw_path, metrics_rows, derive_into, make_warehouse, query
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.ingest.parsers.turns import is_turns_log, parse_turns

RUN = "tiny-llama__cpu_seqs4__4k__vllm__1130-060000"
STARTED = "2026-11-30T06:01:02Z"


def _line(**obj) -> str:
    return json.dumps(obj)


def workload_line(name: str, kind: str, sessions: int, turns: int, **extra) -> str:
    params = ({"kind": kind, "start_tokens": 1000, "end_tokens": 3000} if kind == "ramp"
              else {"kind": kind, "shared_history_tokens": 5000, "turn_tokens": 300})
    return _line(event="workload", workload=name, kind=kind, sessions=sessions, turns=turns,
                 output_tokens=11, seed=3100, params=params, started_at=STARTED, **extra)


def request_line(name: str, kind: str, idx: int, session: int, turn: int, *, ttft: float | None,
                 latency: float | None, input_tokens: int | None, output_tokens: int = 11,
                 started: float = 0.0, needle: bool | None = None, error: str = "",
                 target: int = 1000, point_id: str | None = None) -> str:
    ramp = kind == "ramp"
    answer = ("code 4417" if needle else "no idea") if ramp and not error else None
    return _line(event="request", workload=name, kind=kind,
                 point_id=point_id or (f"{name}__t{turn:02d}" if ramp else f"{name}__s02"),
                 session=session, turn=turn, request_idx=idx, target_tokens=target,
                 input_tokens=input_tokens, output_tokens=output_tokens, ttft_s=ttft,
                 latency_s=latency, max_itl_s=0.004 if ttft is not None else None, started_s=started,
                 needle_ok=needle, answer=answer, error=error)


def done_line(name: str, requests: int, failed: int, wall_s: float | None = 3.41) -> str:
    return _line(event="done", workload=name, requests=requests, failed=failed, wall_s=wall_s)


# The ramp: 3 turns of 2 sessions. (line, idx, session, turn, ttft, latency, input tokens, needle,
# error). Lines are in order of completion. Turn 2 of session 1 failed; turn 3 of session 1 answered
# without the needle.
RAMP_REQUESTS = [
    (2, 1, 1, 1, 0.12, 0.55, 1010, True, ""),
    (3, 0, 0, 1, 0.10, 0.50, 1000, True, ""),
    (4, 2, 0, 2, 0.20, 0.70, 2000, True, ""),
    (5, 3, 1, 2, None, None, None, None, "ReadTimeout: timed out"),
    (6, 4, 0, 3, 0.30, 0.90, 3000, True, ""),
    (7, 5, 1, 3, 0.35, 1.00, 3020, False, ""),
]


def ramp_log() -> str:
    lines = [workload_line("ramp", "ramp", 2, 3)]
    for _, idx, session, turn, ttft, latency, tokens, needle, error in RAMP_REQUESTS:
        lines.append(request_line("ramp", "ramp", idx, session, turn, ttft=ttft, latency=latency,
                                  input_tokens=tokens, needle=needle, error=error,
                                  output_tokens=0 if error else 11, target=1000 * turn))
    lines.append(done_line("ramp", 6, 1))
    # A second ramp of one turn whose only request failed; the run stopped before its done line.
    lines.append(workload_line("ramp-b", "ramp", 1, 1))
    lines.append(request_line("ramp-b", "ramp", 0, 0, 1, ttft=None, latency=None, input_tokens=None,
                              output_tokens=0, error="ServerDisconnectedError: gone"))
    return "\n".join(lines) + "\n"


# The agents workload: 2 sessions of 2 turns. idx 2 got its 10 tokens after the first within
# 0.1 ms (a burst: left out of TPOT); idx 3 failed.
def agents_log() -> str:
    lines = [
        workload_line("team", "agents", 2, 2),
        request_line("team", "agents", 0, 0, 1, ttft=0.2, latency=1.2, input_tokens=5000, started=0.0),
        request_line("team", "agents", 1, 1, 1, ttft=0.4, latency=2.4, input_tokens=5010, started=0.0),
        request_line("team", "agents", 2, 0, 2, ttft=0.3, latency=0.3001, input_tokens=5600, started=1.3),
        request_line("team", "agents", 3, 1, 2, ttft=None, latency=None, input_tokens=None,
                     output_tokens=0, started=2.5, error="ServerDisconnectedError: x"),
        done_line("team", 4, 1, 2.6),
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# the parser


def test_log_names():
    assert is_turns_log("ramp.log")
    assert is_turns_log("agents.team.jsonl")
    assert not is_turns_log("agents..jsonl")
    assert not is_turns_log("bench/agents.team.jsonl")
    assert not is_turns_log("niah.log")


def test_good_lines_give_rows_with_their_lines_and_the_done_figures():
    parsed = parse_turns(ramp_log().encode(), "ramp.log")
    assert parsed.errors == []
    first, second = parsed.workloads
    assert first["workload"] == "ramp" and first["kind"] == "ramp" and first["source_line"] == 1
    assert (first["sessions"], first["turns"], first["output_tokens"], first["seed"]) == (2, 3, 11, 3100)
    assert json.loads(first["params_json"]) == {"kind": "ramp", "start_tokens": 1000, "end_tokens": 3000}
    assert first["started_at"].isoformat() == "2026-11-30T06:01:02+00:00"
    assert (first["done_requests"], first["done_failed"], first["done_wall_s"]) == (6, 1, 3.41)
    # The second ramp has no done line: its figures stay null, and that is not an error.
    assert second["source_line"] == 9
    assert (second["done_requests"], second["done_failed"], second["done_wall_s"]) == (None, None, None)
    assert [(r["request_idx"], r["source_line"]) for r in parsed.requests] == [
        (1, 2), (0, 3), (2, 4), (3, 5), (4, 6), (5, 7), (0, 10)]
    failed = parsed.requests[3]
    assert failed["error"] == "ReadTimeout: timed out" and failed["ttft_s"] is None
    assert failed["input_tokens"] is None and failed["needle_ok"] is None
    assert parsed.requests[5]["needle_ok"] is False and parsed.requests[5]["point_id"] == "ramp__t03"


def test_cut_off_last_line_is_an_error_and_the_rest_is_read():
    text = agents_log()
    cut = text + '{"event": "request", "workload": "team", "kind": "age'
    parsed = parse_turns(cut.encode(), "agents.team.jsonl")
    assert len(parsed.requests) == 4 and len(parsed.workloads) == 1
    assert [(e.line, "cut short" in e.reason) for e in parsed.errors] == [(7, True)]
    assert parsed.errors[0].reason.startswith("agents.team.jsonl: ")


def test_bad_lines_are_errors_naming_line_and_reason():
    lines = [
        workload_line("ramp", "ramp", 1, 2),
        request_line("ramp", "ramp", 0, 0, 1, ttft=0.1, latency=0.2, input_tokens=100).replace(
            '"ttft_s": 0.1', '"ttft_s": "fast"'),
        _line(event="request", workload="ramp", kind="ramp", point_id="ramp__t01", session=0, turn=1),
        "not json at all",
        "[1, 2]",
        _line(event="bogus"),
        request_line("other", "ramp", 0, 0, 1, ttft=0.1, latency=0.2, input_tokens=100),
        request_line("ramp", "agents", 1, 0, 1, ttft=0.1, latency=0.2, input_tokens=100),
        request_line("ramp", "ramp", 2, 0, 1, ttft=0.1, latency=0.2, input_tokens=100).replace(
            '"session": 0', '"session": true'),
        workload_line("x", "chat", 1, 1),
        workload_line("y", "ramp", 1, 1).replace('"turns": 1', '"turns": "one"'),
        request_line("ramp", "ramp", 3, 0, 2, ttft=0.1, latency=0.3, input_tokens=200),
        request_line("ramp", "ramp", 3, 0, 2, ttft=0.1, latency=0.3, input_tokens=200),
        done_line("nobody", 1, 0),
        done_line("ramp", 1, 0).replace('"failed": 0', '"failed": null'),
    ]
    parsed = parse_turns(("\n".join(lines) + "\n").encode(), "ramp.log")
    reasons = {e.line: e.reason for e in parsed.errors}
    assert sorted(reasons) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15]
    assert "ttft_s must be a finite number or null" in reasons[2]
    assert "missing key(s) request_idx, input_tokens, output_tokens, ttft_s, latency_s, error" in reasons[3]
    assert "not valid JSON" in reasons[4] and "cut short" not in reasons[4]
    assert "not a JSON object" in reasons[5]
    assert "unknown event 'bogus'" in reasons[6]
    assert "'other' has no workload line before it" in reasons[7]
    assert "kind 'agents' differs" in reasons[8]
    assert "session must be an integer" in reasons[9]
    assert "kind must be one of ramp, agents" in reasons[10]
    assert "turns must be an integer" in reasons[11]
    assert "request_idx 3 appears twice" in reasons[13]
    assert "done line" in reasons[14] and "'nobody'" in reasons[14]
    assert "failed is null" in reasons[15]
    assert [r["source_line"] for r in parsed.requests] == [12]
    assert [w["workload"] for w in parsed.workloads] == ["ramp"]
    assert parsed.workloads[0]["done_requests"] is None


def test_nul_bytes_and_long_answers_are_cleaned():
    long = request_line("ramp", "ramp", 0, 0, 1, ttft=0.1, latency=0.2, input_tokens=100, needle=True)
    obj = json.loads(long)
    obj["answer"] = "a\x00" + "b" * 500
    data = (workload_line("ramp", "ramp", 1, 1) + "\n" + json.dumps(obj) + "\n").encode()
    (row,) = parse_turns(data).requests
    assert row["answer"] == "a" + "b" * 199


# ---------------------------------------------------------------------------------------------
# ingest


def cache_metrics(hits: float, queries: float) -> str:
    return ("# TYPE vllm:prefix_cache_queries_total counter\n"
            f'vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {queries}\n'
            f'vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}\n')


def write_run(root: Path) -> Path:
    folder = root / "data" / "runs" / RUN
    (folder / "bench").mkdir(parents=True)
    (folder / "ramp.log").write_text(ramp_log())
    (folder / "agents.team.jsonl").write_text(agents_log() + '{"event": "done", "work')
    (folder / "niah.log").write_text("GATE niah score= 1.0\n")
    (folder / "bench" / "ramp__t01.metrics.before.txt").write_text(cache_metrics(0, 0))
    (folder / "bench" / "ramp__t01.metrics.after.txt").write_text(cache_metrics(0, 1000))
    (folder / "bench" / "ramp__t02.metrics.before.txt").write_text(cache_metrics(0, 1000))
    (folder / "bench" / "ramp__t02.metrics.after.txt").write_text(cache_metrics(900, 3000))
    (folder / "bench" / "team__s02.metrics.before.txt").write_text(cache_metrics(100, 1000))
    (folder / "bench" / "team__s02.metrics.after.txt").write_text(cache_metrics(4100, 6000))
    return folder


def wh_query(root: Path, sql: str) -> list[tuple]:
    return db_tuples(root / "data" / "warehouse.duckdb", sql)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("turns")
    write_run(root)
    ingest.run(runs_dir=root / "data" / "runs", warehouse=root / "data" / "warehouse.duckdb", root=root)
    return root


def test_ingest_reads_both_logs_with_file_and_line(ingested: Path):
    folder = f"data/runs/{RUN}"
    assert wh_query(ingested, "select workload, kind, sessions, turns, done_requests, done_wall_s, "
                              "source_file, source_line from raw_turn_workloads order by workload") == [
        ("ramp", "ramp", 2, 3, 6, 3.41, f"{folder}/ramp.log", 1),
        ("ramp-b", "ramp", 1, 1, None, None, f"{folder}/ramp.log", 9),
        ("team", "agents", 2, 2, 4, 2.6, f"{folder}/agents.team.jsonl", 1),
    ]
    assert wh_query(ingested, "select workload, count(*), min(source_line), max(source_line) "
                              "from raw_turn_requests group by workload order by workload") == [
        ("ramp", 6, 2, 7), ("ramp-b", 1, 10, 10), ("team", 4, 2, 5)]
    assert wh_query(ingested, "select needle_ok, answer, error from raw_turn_requests "
                              "where workload = 'ramp' and request_idx = 5") == [(False, "no idea", "")]
    # The agents log was cut short after its done line.
    assert wh_query(ingested, "select source_file, source_line, reason like '%cut short%' "
                              "from ingest_errors") == [(f"{folder}/agents.team.jsonl", 7, True)]
    assert wh_query(ingested, "select count(distinct point_id) from raw_metrics") == [(3,)]


def test_ingest_reads_a_changed_log_again(ingested: Path, tmp_path: Path):
    root = tmp_path
    folder = write_run(root)
    kwargs = dict(runs_dir=root / "data" / "runs", warehouse=root / "data" / "warehouse.duckdb", root=root)
    ingest.run(**kwargs)
    (folder / "ramp.log").write_text(workload_line("ramp", "ramp", 2, 3) + "\n")
    summary = ingest.run(**kwargs)
    assert summary["runs_read"] == 1
    assert wh_query(root, "select count(*) from raw_turn_requests where workload like 'ramp%'") == [(0,)]
    assert wh_query(root, "select count(*) from raw_turn_workloads") == [(2,)]


def test_ingested_folder_derives(ingested: Path, tmp_path: Path):
    out = tmp_path / "out"
    summary = derive.run(warehouse=ingested / "data" / "warehouse.duckdb",
                         campaign_db=out / "campaign.duckdb", derived_dir=out / "derived", metrics_file=out / "metrics.json",
                         rules=RULES, workloads=WORKLOADS)
    assert (summary["turn_requests"], summary["ramp_turns"], summary["agent_runs"]) == (11, 4, 1)
    assert query(out, "select turn, cache_hit_pct, provisional from ramp_turns where workload = 'ramp' "
                      "order by turn") == [
        {"turn": 1, "cache_hit_pct": 0.0, "provisional": False},
        {"turn": 2, "cache_hit_pct": 45.0, "provisional": False},
        {"turn": 3, "cache_hit_pct": None, "provisional": False}]
    csv = (out / "derived" / "ramp_turns.csv").read_text().splitlines()
    assert csv[0].startswith("run_id,workload,turn,sessions,answered,context_tokens,longest_wait_s")
    assert len(csv) == 5
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["turn_requests"], metrics["ramp_turns"], metrics["agent_runs"]) == (11, 4, 1)
    assert metrics["ramp_needle_missed"] == 1


# ---------------------------------------------------------------------------------------------
# derive, given raw rows


def _rows_of(text: str, name: str, run_id: str) -> tuple[list[dict], list[dict]]:
    parsed = parse_turns(text.encode(), name)
    assert parsed.errors == []
    source = raw_path(run_id, name)
    workloads = [{**w, "run_id": run_id, "source_file": source} for w in parsed.workloads]
    requests = [{**r, "run_id": run_id, "source_file": source} for r in parsed.requests]
    return workloads, requests


def turn_rows(gate_score: float | None = 0.0) -> dict[str, tuple[dict, list[dict]]]:
    ramp_w, ramp_r = _rows_of(ramp_log(), "ramp.log", RUN)
    team_w, team_r = _rows_of(agents_log(), "agents.team.jsonl", RUN)
    metrics = (
        metrics_rows(RUN, "ramp__t01", "before", [("vllm:prefix_cache_hits_total", "", 0.0),
                                              ("vllm:prefix_cache_queries_total", "", 0.0)])
        + metrics_rows(RUN, "ramp__t01", "after", [("vllm:prefix_cache_hits_total", "", 0.0),
                                               ("vllm:prefix_cache_queries_total", "", 1000.0)])
        + metrics_rows(RUN, "ramp__t02", "before", [("vllm:prefix_cache_hits_total", "", 0.0),
                                                ("vllm:prefix_cache_queries_total", "", 1000.0)])
        + metrics_rows(RUN, "ramp__t02", "after", [("vllm:prefix_cache_hits_total", "", 900.0),
                                               ("vllm:prefix_cache_queries_total", "", 3000.0)])
        + metrics_rows(RUN, "team__s02", "before", [("vllm:prefix_cache_hits_total", "", 100.0),
                                                ("vllm:prefix_cache_queries_total", "", 1000.0)])
        + metrics_rows(RUN, "team__s02", "after", [("vllm:prefix_cache_hits_total", "", 4100.0),
                                               ("vllm:prefix_cache_queries_total", "", 6000.0)])
    )
    gates = ([] if gate_score is None else
             [{"run_id": RUN, "gate": "niah", "score": gate_score,
               "source_file": raw_path(RUN, "niah.log"), "source_line": 3}])
    return {
        "raw_runs": ({}, [{"run_id": RUN, "spec": "tiny-seqs4", "recovered": False,
                           "source_file": raw_path(RUN, "meta.json"), "source_line": 1}]),
        "raw_gates": ({}, gates),
        "raw_metrics": ({}, metrics),
        "raw_turn_workloads": ({}, ramp_w + team_w),
        "raw_turn_requests": ({}, ramp_r + team_r),
    }


@pytest.fixture(scope="module")
def turns_built(tmp_path_factory) -> Path:
    _, out = derive_into(tmp_path_factory.mktemp("turns_derive"), rows=turn_rows())
    return out


def test_ramp_turns_given_expect(turns_built: Path):
    rows = query(turns_built, "select * exclude (run_id) from ramp_turns order by workload, turn")
    source = raw_path(RUN, "ramp.log")
    base = {"sessions": 2, "provisional": True, "source_file": source}
    assert rows == [
        {**base, "workload": "ramp", "turn": 1, "answered": 2, "context_tokens": 1010,
         "longest_wait_s": 0.12, "latency_max_s": 0.55, "needle_found": 2, "needle_checked": 2,
         "cache_hit_pct": 0.0, "source_line": 2},
        {**base, "workload": "ramp", "turn": 2, "answered": 1, "context_tokens": 2000,
         "longest_wait_s": 0.20, "latency_max_s": 0.70, "needle_found": 1, "needle_checked": 1,
         "cache_hit_pct": 45.0, "source_line": 4},
        {**base, "workload": "ramp", "turn": 3, "answered": 2, "context_tokens": 3020,
         "longest_wait_s": 0.35, "latency_max_s": 1.00, "needle_found": 1, "needle_checked": 2,
         "cache_hit_pct": None, "source_line": 7},
        # No request of the turn answered: its first request is the evidence.
        {**base, "workload": "ramp-b", "turn": 1, "sessions": 1, "answered": 0, "context_tokens": None,
         "longest_wait_s": None, "latency_max_s": None, "needle_found": 0, "needle_checked": 0,
         "cache_hit_pct": None, "source_line": 10},
    ]


def test_agent_runs_given_expect_burst_left_out_of_tpot(turns_built: Path):
    (row,) = query(turns_built, "select * exclude (run_id) from agent_runs")
    assert row == pytest.approx({
        "workload": "team", "sessions": 2, "turns": 2, "planned": 4, "sent": 4, "completed": 3,
        "failed": 1, "history_tokens_max": 5600, "ttft_median_s": 0.3, "ttft_p90_s": 0.38,
        "ttft_p99_s": 0.398,   # 0.2, 0.3, 0.4: 0.3 + 0.1 * (0.99 * 2 - 1)
        "tpot_median_ms": 150.0, "decode_tok_s_per_user": 1000 / 150, "output_tok_s": 33 / 2.4,
        "cache_hit_pct": 80.0, "provisional": True,
        "source_file": raw_path(RUN, "agents.team.jsonl"), "source_line": 1})


def test_turn_requests_carry_tpot_burst_and_errors(turns_built: Path):
    rows = query(turns_built, "select request_idx, tpot_ms, ok, burst, error from turn_requests "
                              "where workload = 'team' order by request_idx")
    assert [r["request_idx"] for r in rows] == [0, 1, 2, 3]
    assert rows[0]["tpot_ms"] == pytest.approx(100.0) and rows[1]["tpot_ms"] == pytest.approx(200.0)
    assert rows[2]["tpot_ms"] == pytest.approx(0.01) and rows[2]["burst"] is True
    assert [r["burst"] for r in rows] == [False, False, True, False]
    assert rows[3] == {"request_idx": 3, "tpot_ms": None, "ok": False, "burst": False,
                       "error": "ServerDisconnectedError: x"}
    assert query(turns_built, "select count(*) as n from turn_requests where ok and error is not null") == [
        {"n": 0}]
    (miss,) = query(turns_built, "select point_id, needle_ok, answer, source_line from turn_requests "
                                 "where workload = 'ramp' and request_idx = 5")
    assert miss == {"point_id": "ramp__t03", "needle_ok": False, "answer": "no idea", "source_line": 7}


def test_multi_turn_workloads_stay_out_of_the_benchmark_tables(turns_built: Path):
    assert query(turns_built, "select count(*) as n from invalid_rows") == [{"n": 0}]
    assert query(turns_built, "select count(*) as n from bench_points") == [{"n": 0}]


def test_passed_gate_clears_provisional(tmp_path: Path):
    _, out = derive_into(tmp_path, rows=turn_rows(gate_score=1.0))
    assert query(out, "select distinct provisional from ramp_turns") == [{"provisional": False}]
    assert query(out, "select provisional from agent_runs") == [{"provisional": False}]


def test_warehouse_without_multi_turn_rows_gives_empty_tables(tmp_path: Path):
    warehouse = make_warehouse(tmp_path / "warehouse.duckdb", {})
    out = tmp_path / "out"
    summary = derive.run(warehouse=warehouse, campaign_db=out / "campaign.duckdb",
                         derived_dir=out / "derived", metrics_file=out / "metrics.json",
                         rules=RULES, workloads=WORKLOADS)
    assert (summary["turn_requests"], summary["ramp_turns"], summary["agent_runs"]) == (0, 0, 0)
    for table in ("turn_requests", "ramp_turns", "agent_runs"):
        assert (out / "derived" / f"{table}.csv").read_text().count("\n") == 1


def test_request_without_workload_line_breaks_a_data_test(tmp_path: Path):
    rows = turn_rows()
    rows["raw_turn_workloads"] = ({}, [w for w in rows["raw_turn_workloads"][1] if w["workload"] != "team"])
    with pytest.raises(derive.DataTestError, match=r"turn_requests\.request_names_a_workload_line"):
        derive_into(tmp_path, rows=rows)


"""Given launch.out lines, derive's run_events table lists what went wrong in each run."""
from __future__ import annotations

import pytest

from helpers.derive_rows import BIG, BIG_OLD, DP, SG, raw_path, derive_into, query, raw_rows
from stages.derive import stage as derive


def _lines(run_id: str, *pairs: tuple[str, str]) -> list[dict]:
    return [{"run_id": run_id, "key": k, "value": v, "source_file": raw_path(run_id, "launch.out"),
             "source_line": i} for i, (k, v) in enumerate(pairs, start=1)]


def events_for(tmp_path, launch_out: list[dict]) -> list[dict]:
    rows = raw_rows()
    rows["raw_launch_out"] = ({}, launch_out)
    _, out = derive_into(tmp_path, rows=rows)
    return query(out, "select * exclude (source_file) from run_events order by run_id, source_line")


def test_failed_and_skipped_points_then_a_dead_engine(tmp_path):
    got = events_for(tmp_path, _lines(
        BIG,
        ("status", "ready"), ("ready_s", "609.1"), ("gate_score", "1.0"),
        ("point_error", "long__c04 ReadTimeout: timed out after 30 s"),
        ("point_skipped", "long__c16 engine no longer running"),
        ("prefix_cache_resets", "1"),
        ("points", "0"), ("run_status", "engine_died"), ("finished_at", "2026-10-10T06:00:00Z"),
    ))
    assert got == [
        {"run_id": BIG, "event": "point_failed", "point_id": "long__c04",
         "detail": "ReadTimeout: timed out after 30 s", "source_line": 4},
        {"run_id": BIG, "event": "point_skipped", "point_id": "long__c16",
         "detail": "engine no longer running", "source_line": 5},
        {"run_id": BIG, "event": "engine_died", "point_id": None,
         "detail": "the engine stopped running during the benchmarks; benchmark points written: 0",
         "source_line": 8},
    ]


def test_a_profiled_point_whose_trace_was_not_kept_is_an_event_and_a_kept_one_is_not(tmp_path):
    got = events_for(tmp_path, _lines(
        BIG,
        ("status", "ready"),
        ("profile", "long__c01 profile/long__c01.rank0.1.pt.trace.json.gz"),
        ("profile_error", "long__c16 rank0.2.pt.trace.json.gz: 90000000 bytes, over max_trace_mb 64; not kept"),
        ("points", "2"), ("run_status", "complete"),
    ))
    assert got == [{"run_id": BIG, "event": "profile_failed", "point_id": "long__c16",
                    "detail": "rank0.2.pt.trace.json.gz: 90000000 bytes, over max_trace_mb 64; not kept",
                    "source_line": 3}]


def test_launch_failure_is_one_event_quoting_the_error_line(tmp_path):
    got = events_for(tmp_path, _lines(
        BIG_OLD,
        ("status", "failed"), ("error", "engine exited with code 1 before it was ready"),
        ("points", "0"), ("run_status", "failed"),
    ))
    assert got == [{"run_id": BIG_OLD, "event": "launch_failed", "point_id": None,
                    "detail": "engine exited with code 1 before it was ready", "source_line": 2}]


def test_failed_status_without_an_error_line_is_still_a_launch_failure(tmp_path):
    got = events_for(tmp_path, _lines(BIG_OLD, ("status", "failed"), ("exit_code", "1")))
    assert [(r["event"], r["source_line"]) for r in got] == [("launch_failed", 1)]
    assert "status=failed" in got[0]["detail"]


def test_interrupted_and_failed_after_ready_runs_are_run_level_events(tmp_path):
    got = events_for(tmp_path, _lines(
        BIG, ("status", "ready"), ("points", "2"), ("run_status", "interrupted"),
    ) + _lines(
        SG, ("status", "ready"), ("points", "0"), ("run_status", "failed"),
    ) + _lines(
        DP, ("status", "ready"), ("prefix_cache_resets", "3"), ("points", "3"),
        ("run_status", "complete"),
    ))
    assert [(r["run_id"], r["event"], r["point_id"], r["source_line"]) for r in got] == [
        (BIG, "run_interrupted", None, 3),
        (SG, "run_failed", None, 3),
    ]
    assert got[0]["detail"] == "interrupted; the engine was stopped; benchmark points written: 2"


def test_the_last_run_status_line_decides(tmp_path):
    got = events_for(tmp_path, _lines(
        BIG, ("status", "ready"), ("run_status", "interrupted"), ("run_status", "complete")))
    assert got == []


def test_event_of_an_unknown_run_breaks_an_invariant(tmp_path):
    stray = "ghost__tp1__4k__vllm__0101-000000"
    rows = raw_rows()
    rows["raw_launch_out"] = ({}, _lines(stray, ("status", "ready"), ("run_status", "interrupted")))
    with pytest.raises(derive.DataTestError, match=r"run_events\.event_belongs_to_a_run"):
        derive_into(tmp_path, rows=rows)


def test_run_events_is_public_and_exported(tmp_path):
    rows = raw_rows()
    rows["raw_launch_out"][1].extend(_lines(DP, ("point_error", "chat__c64 RuntimeError: boom")))
    summary, out = derive_into(tmp_path, rows=rows)
    assert summary["run_events"] == 1
    header, row = (out / "derived" / "run_events.csv").read_text().splitlines()
    assert header == "run_id,event,point_id,detail,source_file,source_line"
    assert row == f"{DP},point_failed,chat__c64,RuntimeError: boom,data/runs/{DP}/launch.out,1"

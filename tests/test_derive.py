"""Given raw warehouse rows, derive builds the expected public rows."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.derive_rows import (BIG, BIG_OLD, DP, RULES, SG, WORKLOADS, _fact, derive_into, make_warehouse, query,
                                 raw_path, raw_rows)
from stages.derive import stage as derive
from stages.core.config import CampaignError
from stages.core.files import scratch


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[dict, Path]:
    return derive_into(tmp_path_factory.mktemp("derive"))


# ---------------------------------------------------------------------------------------------
# runs


def test_runs_number_attempts_per_spec_by_start_time(built):
    _, out = built
    rows = {r["run_id"]: r for r in query(out, "select * from runs")}
    assert (rows[BIG_OLD]["attempt"], rows[BIG_OLD]["is_latest"]) == (1, False)
    assert (rows[BIG]["attempt"], rows[BIG]["is_latest"]) == (2, True)
    assert (rows[DP]["attempt"], rows[DP]["is_latest"], rows[DP]["recovered"]) == (1, True, True)
    assert rows[BIG]["source_file"] == f"data/runs/{BIG}/meta.json"


# ---------------------------------------------------------------------------------------------
# launches


def test_launch_ready_from_launch_out_with_engine_figures(built):
    _, out = built
    [row] = query(out, "select * from launches where run_id = $r", {"r": BIG})
    assert row["status"] == "ready"
    assert row["ready_s"] == 609.1
    assert row["kv_tokens"] == 1573325
    assert (row["kv_source_file"], row["kv_source_line"]) == (f"data/runs/{BIG}/server.log", 120)
    assert (row["kv_cache_gib"], row["weights_gib"], row["moe_backend"]) == (25.8, 102.31, "MARLIN")
    assert (row["max_num_seqs"], row["seq_cap"], row["engines"], row["tp"]) == (16, 16, 1, 8)
    assert (row["source_file"], row["source_line"]) == (f"data/runs/{BIG}/launch.out", 1)
    assert row["error_type"] is None


def test_launch_figures_cite_the_lines_that_hold_them(built):
    _, out = built
    rows = {r["run_id"]: r for r in query(out, "select * from launches")}
    big, dp, sg = rows[BIG], rows[DP], rows[SG]
    assert (big["ready_source_file"], big["ready_source_line"]) == (f"data/runs/{BIG}/launch.out", 2)
    assert (big["seq_cap_source_file"], big["seq_cap_source_line"]) == (f"data/runs/{BIG}/cmd.sh", 3)
    # SGLang logged its cap; the DP run took the profile default, which no raw line holds
    assert (sg["seq_cap_source_file"], sg["seq_cap_source_line"]) == (f"data/runs/{SG}/server.log", 30)
    assert (dp["seq_cap"], dp["seq_cap_source_file"], dp["seq_cap_source_line"]) == (1024, None, None)
    assert (dp["ready_s"], dp["ready_source_file"]) == (None, None)


def test_failed_launch_quotes_its_first_error(built):
    _, out = built
    [row] = query(out, "select * from launches where run_id = $r", {"r": BIG_OLD})
    assert row["status"] == "failed"
    assert (row["error_type"], row["error_message"]) == ("NotImplementedError", "DCP is not supported")
    assert row["error_worker"] == "Worker_TP2_DCP2 pid=1926"
    assert (row["error_source_file"], row["error_source_line"]) == (f"data/runs/{BIG_OLD}/server.log", 95)
    assert row["kv_tokens"] is None


def test_launch_ready_from_log_uses_blocks_times_block_size_and_default_cap(built):
    _, out = built
    [row] = query(out, "select * from launches where run_id = $r", {"r": DP})
    assert row["status"] == "ready"
    assert row["kv_tokens"] == 1000 * 32
    assert (row["max_num_seqs"], row["seq_cap"], row["engines"]) == (None, 1024, 2)
    assert row["source_line"] == 90


def test_sglang_launch_uses_its_own_pool_and_request_cap(built):
    _, out = built
    [row] = query(out, "select * from launches where run_id = $r", {"r": SG})
    assert (row["kv_tokens"], row["seq_cap"], row["max_model_len"]) == (500000, 48, 8192)


# ---------------------------------------------------------------------------------------------
# gates


def test_gates_count_probes_and_mark_provisional(built):
    _, out = built
    rows = {r["run_id"]: r for r in query(out, "select * from gates")}
    assert (rows[BIG]["probes"], rows[BIG]["passed_probes"], rows[BIG]["provisional"]) == (3, 3, False)
    assert (rows[SG]["score"], rows[SG]["passed_probes"], rows[SG]["provisional"]) == (0.0, 0, True)
    assert (rows[BIG]["failed_probes"], rows[SG]["failed_probes"]) == (0, 1)
    assert DP not in rows
    assert len(query(out, "select * from gate_probes where run_id = $r", {"r": BIG})) == 3
    # a failed probe (it timed out) counts as missed, with its reason and no reasoning length
    assert [(r["ok"], r["failure"], r["reasoning_tokens"]) for r in query(
        out, "select * from gate_probes where run_id in ($a, $b) order by run_id, probe_idx",
        {"a": BIG, "b": SG})] == [(True, None, 1200)] * 3 + [
            (False, "no answer within the probe's timeout of 9.0 s (ReadTimeout)", None)]


# ---------------------------------------------------------------------------------------------
# sequences_fit


def test_sequences_fit_long_context_example(built):
    _, out = built
    [row] = query(out, "select * from sequences_fit where run_id = $r and workload = 'long'", {"r": BIG})
    assert row["context_tokens"] == 250512
    assert row["fit_by_kv"] == 6          # floor(1,573,325 / 250,512) x 1
    assert row["sequences"] == 6
    assert row["beyond_max_context"] is False
    assert row["kv_source_line"] == 120


def test_sequences_fit_capped_and_beyond_max_context(built):
    _, out = built
    rows = {r["workload"]: r for r in query(out, "select * from sequences_fit where run_id = $r", {"r": BIG})}
    assert (rows["chat"]["fit_by_kv"], rows["chat"]["sequences"]) == (1430, 16)
    assert rows["huge"]["beyond_max_context"] is True
    assert rows["huge"]["sequences"] is None


def test_sequences_fit_multiplies_by_engines_and_skips_failed_launches(built):
    _, out = built
    [row] = query(out, "select * from sequences_fit where run_id = $r and workload = 'chat'", {"r": DP})
    assert (row["engines"], row["fit_by_kv"], row["sequences"]) == (2, 58, 58)   # floor(32000/1100) x 2
    assert query(out, "select * from sequences_fit where run_id = $r", {"r": BIG_OLD}) == []


# ---------------------------------------------------------------------------------------------
# invalid_rows and bench_requests


def test_prefix_cache_request_is_invalid_with_a_readable_detail(built):
    _, out = built
    [row] = query(out, "select * from invalid_rows where reason = 'prefix_cache'")
    assert (row["run_id"], row["point_id"], row["request_idx"]) == (BIG, "long__c04", 2)
    assert row["detail"] == "prefill 67,568 tok/s is above the 60,000 tok/s cache rule"
    assert row["value"] == pytest.approx(250000 / 3.7)
    assert row["threshold"] == 60000
    assert row["source_file"] == f"data/runs/{BIG}/bench/long__c04.json"


def test_failed_and_short_requests_are_listed(built):
    _, out = built
    rows = {(r["request_idx"], r["reason"]): r
            for r in query(out, "select * from invalid_rows where point_id = 'long__c04'")}
    assert set(rows) == {(2, "prefix_cache"), (5, "failed"), (6, "short_output")}
    assert rows[(5, "failed")]["detail"] == "request failed: Connection reset by peer"
    assert rows[(6, "short_output")]["detail"] == "produced 100 of the 512 output tokens its workload asks for"
    assert (rows[(6, "short_output")]["value"], rows[(6, "short_output")]["threshold"]) == (100, 512)


def test_cached_share_flags_every_request_of_the_point(built):
    _, out = built
    rows = query(out, "select * from invalid_rows where reason = 'cached_share' order by request_idx")
    assert [(r["point_id"], r["request_idx"]) for r in rows] == [("long__c16", i) for i in range(4)]
    assert rows[0]["value"] == pytest.approx(50.0)
    assert rows[0]["detail"] == ("the engine served 50.0% of this point's prompt tokens from its "
                                 "prefix cache, above the 20.0% rule")
    assert rows[0]["source_file"] == f"data/runs/{BIG}/bench/long__c16.metrics.after.txt"


def test_bench_requests_carry_derived_figures_and_validity(built):
    _, out = built
    rows = {r["request_idx"]: r for r in query(
        out, "select * from bench_requests where point_id = 'long__c04'")}
    assert rows[0]["tpot_ms"] == pytest.approx(20.0)
    assert rows[0]["prefill_tok_s"] == pytest.approx(25000.0)
    assert (rows[0]["ok"], rows[0]["valid"], rows[0]["workload"], rows[0]["concurrency"]) == (True, True, "long", 4)
    assert (rows[2]["ok"], rows[2]["valid"]) == (True, False)
    assert (rows[5]["ok"], rows[5]["valid"], rows[5]["error"]) == (False, False, "Connection reset by peer")
    assert rows[5]["tpot_ms"] is None and rows[5]["prefill_tok_s"] is None


def test_prefix_cache_rule_is_a_bound_parameter(tmp_path):
    _, out = derive_into(tmp_path, rules={**RULES, "prefix_cache_tok_s": 70000})
    assert query(out, "select * from invalid_rows where reason = 'prefix_cache'") == []


def _derive_profiles(tmp_path: Path, rows: dict) -> Path:
    """Derive with two profiles: the active one (local-cpu, its own cap, cache rule and only the
    chat workload) and h200x8, the profile of the fixture runs."""
    active = {"rules": {**RULES, "default_max_num_seqs": 64, "prefix_cache_tok_s": 70000},
              "workloads": {"chat": WORKLOADS["chat"]}}
    node = {"rules": {**RULES, "default_max_num_seqs": 512}, "workloads": WORKLOADS}
    warehouse = make_warehouse(tmp_path / "warehouse.duckdb", rows)
    out = tmp_path / "out"
    derive.run(warehouse=warehouse, campaign_db=out / "campaign.duckdb", derived_dir=out / "derived",
               metrics_file=out / "metrics.json", rules=active["rules"], workloads=active["workloads"],
               profiles={"local-cpu": active, "h200x8": node})
    return out


def test_each_run_is_judged_by_its_own_profiles_rules_and_workloads(tmp_path):
    out = _derive_profiles(tmp_path, raw_rows())
    [launch] = query(out, "select seq_cap from launches where run_id = $r", {"r": DP})
    assert launch["seq_cap"] == 512                       # h200x8's default cap, not local-cpu's 64
    [point] = query(out, "select * from bench_points where point_id = 'long__c04'")
    assert (point["prompt_tokens"], point["output_tokens"]) == (250000, 512)   # not in local-cpu's
    cached = query(out, "select threshold from invalid_rows where reason = 'prefix_cache'")
    assert cached and {r["threshold"] for r in cached} == {60000.0}
    fits = query(out, "select distinct workload from sequences_fit where run_id = $r", {"r": BIG})
    assert {r["workload"] for r in fits} == set(WORKLOADS)


def test_a_run_of_an_unknown_profile_takes_the_active_profiles(tmp_path):
    rows = raw_rows()
    for run in rows["raw_runs"][1]:       # BIG: a profile params no longer has; DP: none recorded
        run["profile"] = {BIG: "retired", DP: None}.get(run["run_id"], run["profile"])
    out = _derive_profiles(tmp_path, rows)
    [launch] = query(out, "select seq_cap from launches where run_id = $r", {"r": DP})
    assert launch["seq_cap"] == 64
    [point] = query(out, "select * from bench_points where point_id = 'long__c04'")
    assert point["prompt_tokens"] is None                 # local-cpu has no `long` workload
    assert query(out, "select * from invalid_rows where reason = 'prefix_cache'") == []


# ---------------------------------------------------------------------------------------------
# bench_points


def test_point_ttft_over_valid_requests_only(built):
    _, out = built
    [row] = query(out, "select * from bench_points where point_id = 'long__c04'")
    # TTFTs kept: 10, 12, 14, 16, 20 (3.7 s from the cache and the failed request left out).
    assert row["ttft_median_s"] == pytest.approx(14.0)
    # quantile_cont(0.9) over 5 values: 16 + 0.6 x (20 - 16)
    assert row["ttft_p90_s"] == pytest.approx(18.4)
    # TPOT over successful requests: 10, 20, 25, 30, 40, 50 ms
    assert row["tpot_median_ms"] == pytest.approx(27.5)
    assert row["decode_tok_s_per_user"] == pytest.approx(1000 / 27.5)
    assert (row["sent"], row["completed"], row["failed"], row["invalid_requests"]) == (7, 6, 1, 3)
    assert row["output_tok_s"] == 210.5
    assert row["cache_hit_pct"] == pytest.approx(20.0)    # 100 x 300 / 1500, summed over engines
    assert (row["prompt_tokens"], row["output_tokens"]) == (250000, 512)
    assert (row["seq_limit"], row["capacity_limited"], row["provisional"]) == (6, False, False)
    assert row["ttft_requests"] == 5


def test_point_whose_requests_all_came_from_the_cache_has_no_ttft(tmp_path):
    rows = raw_rows()
    defaults, requests = rows["raw_bench_requests"]
    # 250,000 prompt tokens in 1 s: every request of long__c16 is above the 60,000 tok/s rule
    requests = [{**r, "ttft_s": 1.0, "latency_s": r["latency_s"] - r["ttft_s"] + 1.0}
                if r["point_id"] == "long__c16" else r for r in requests]
    _, out = derive_into(tmp_path, rows={**rows, "raw_bench_requests": (defaults, requests)})
    [row] = query(out, "select * from bench_points where point_id = 'long__c16'")
    assert (row["ttft_requests"], row["ttft_median_s"], row["ttft_p90_s"]) == (0, None, None)
    assert row["tpot_median_ms"] == pytest.approx(20.0)   # TPOT is not a cache figure
    reasons = query(out, "select count(*) as n from invalid_rows "
                         "where point_id = 'long__c16' and reason = 'prefix_cache'")
    assert reasons == [{"n": 4}]


def test_concurrency_above_sequences_that_fit_is_capacity_limited(built):
    _, out = built
    [row] = query(out, "select * from bench_points where point_id = 'long__c16'")
    assert (row["concurrency"], row["seq_limit"], row["capacity_limited"]) == (16, 6, True)
    assert row["cache_hit_pct"] == pytest.approx(50.0)    # older gpu_ counter names
    assert row["invalid_requests"] == 4
    assert row["ttft_median_s"] == pytest.approx(31.5)    # cached_share keeps the TTFT figures


def test_output_in_one_burst_is_invalid_and_left_out_of_tpot(built):
    _, out = built
    rows = query(out, "select * from invalid_rows where reason = 'burst_output'")
    assert [(r["run_id"], r["point_id"], r["request_idx"]) for r in rows] == [(DP, "chat__c64", 2)]
    assert rows[0]["value"] == pytest.approx(0.003) and rows[0]["threshold"] == 0.5
    assert rows[0]["detail"].startswith("100 tokens came 0.0030 ms apart after the first")
    [point] = query(out, "select * from bench_points where point_id = 'chat__c64'")
    assert point["tpot_median_ms"] == pytest.approx(11.0)     # median of 10 and 12, not of 3 rows
    assert point["decode_tok_s_per_user"] == pytest.approx(1000 / 11.0)
    assert point["ttft_median_s"] == pytest.approx(0.5)       # the burst request keeps its TTFT
    assert point["invalid_requests"] == 1


def test_point_without_gate_is_provisional(built):
    _, out = built
    [row] = query(out, "select * from bench_points where run_id = $r", {"r": DP})
    assert (row["seq_limit"], row["capacity_limited"], row["provisional"]) == (58, True, True)
    assert row["cache_hit_pct"] is None


# ---------------------------------------------------------------------------------------------
# outputs


def test_outputs_summary_csv_and_metrics(built):
    summary, out = built
    assert summary == {"runs": 4, "launches": 4, "launch_log_facts": 9, "launch_changes": 1,
                       "point_engine_stats": 0, "point_metrics_series": 0, "point_metrics_summary": 0, "run_events": 0, "gates": 2, "gate_probes": 4, "bench_requests": 14,
                       "bench_points": 3, "point_repeats": 3, "invalid_rows": 8, "sequences_fit": 9, "turn_requests": 0,
                       "ramp_turns": 0, "agent_runs": 0, "ingest_errors": 1, "quarantine": 0, "nodes": 0, "node_gpus": 0, "node_topology": 0, "node_p2p": 0,
                       "node_allreduce": 0, "node_allreduce_peak": 0, "point_gpu_energy": 0,
                       "point_energy": 0, "point_slo": 0, "slo_requests": 0, "slo_concurrency": 0,
                       "pareto_points": 0, "pareto_left_out": 3, "pareto_compare": 0,
                       "point_cost": 0, "run_inferred": 0, "point_profile": 0,
                       "run_timeline": 1, "run_phases": 1, "point_client_time": 0,
                           "launch_plans": 4}   # no run names its GPUs
    for table in derive.PUBLIC_TABLES:
        assert (out / "derived" / f"{table}.csv").is_file()
    header = (out / "derived" / "sequences_fit.csv").read_text().splitlines()[0]
    assert header.startswith("run_id,workload,prompt_tokens,output_tokens,context_tokens,kv_tokens")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["launches_ready"] == 3 and metrics["launches_failed"] == 1
    assert metrics["gates_passed"] == 1
    assert metrics["capacity_limited_points"] == 2
    assert metrics["invalid_rows"] == 8 and metrics["invalid_requests"] == 8
    assert metrics["quarantined_rows"] == 0
    assert metrics["best_output_tok_s"] == 900.0
    assert metrics["min_ttft_median_s"] == 0.5
    assert not list(out.glob("*.tmp-*"))


def test_rebuild_replaces_the_previous_database(tmp_path):
    derive_into(tmp_path)
    rows = raw_rows()
    rows["raw_runs"] = ({}, [r for r in rows["raw_runs"][1] if r["run_id"] != SG])
    (tmp_path / "warehouse.duckdb").unlink()
    summary, out = derive_into(tmp_path, rows=rows)
    assert summary["runs"] == 3
    assert query(out, "select * from runs where run_id = $r", {"r": SG}) == []


# ---------------------------------------------------------------------------------------------
# data tests and errors


def test_broken_invariant_raises_data_test_error_naming_table_check_and_row(tmp_path):
    rows = raw_rows()
    rows["raw_bench_points"][1][2]["completed"] = 5      # chat__c64 sent 3
    previous = tmp_path / "out" / "campaign.duckdb"
    previous.parent.mkdir(parents=True)
    previous.write_bytes(b"previous")
    with pytest.raises(derive.DataTestError) as caught:
        derive_into(tmp_path, rows=rows)
    message = str(caught.value)
    assert "\n" not in message
    assert "bench_points.completed_within_sent" in message
    assert f"run_id='{DP}'" in message and "point_id='chat__c64'" in message
    assert "completed=5" in message and "sent=3" in message
    assert previous.read_bytes() == b"previous"
    assert not (tmp_path / "out" / "derived").exists()
    assert isinstance(caught.value, CampaignError)


def test_duplicate_key_breaks_uniqueness(tmp_path):
    rows = raw_rows()
    rows["raw_runs"][1].append(dict(rows["raw_runs"][1][0]))
    with pytest.raises(derive.DataTestError, match=r"runs\.unique\(run_id\): run_id="):
        derive_into(tmp_path, rows=rows)


def test_missing_warehouse_is_a_user_error(tmp_path):
    with pytest.raises(CampaignError, match="campaign ingest"):
        derive.run(warehouse=tmp_path / "none.duckdb", campaign_db=tmp_path / "c.duckdb",
                   derived_dir=tmp_path / "d", metrics_file=tmp_path / "m.json",
                   rules=RULES, workloads=WORKLOADS)


def test_missing_rule_is_a_user_error(tmp_path):
    rules = {k: v for k, v in RULES.items() if k != "gate_min_score"}
    with pytest.raises(CampaignError, match="rules is missing gate_min_score"):
        derive_into(tmp_path, rules=rules)


def test_every_model_is_a_cte_chain_ending_in_final():
    for name in (*derive.STAGING_MODELS, *derive.INTERMEDIATE_MODELS, *derive.MART_MODELS):
        sql = derive.model_sql(name)
        assert sql.splitlines()[-1] == "select * from final", name
        assert "{" not in sql.replace("{:", ""), name


def test_reported_attempt_is_the_latest_complete_one(tmp_path):
    rows = raw_rows()
    out_rows = rows.setdefault("raw_launch_out", ({}, []))[1]
    out_rows[:] = [r for r in out_rows if r.get("key") != "run_status"]
    out_rows += [
        {"run_id": BIG_OLD, "key": "run_status", "value": "complete",
         "source_file": raw_path(BIG_OLD, "launch.out"), "source_line": 9},
        {"run_id": BIG, "key": "run_status", "value": "interrupted",
         "source_file": raw_path(BIG, "launch.out"), "source_line": 9},
    ]
    _, out = derive_into(tmp_path, rows=rows)
    got = {r["run_id"]: r for r in query(out, "select * from runs")}
    assert (got[BIG]["run_status"], got[BIG]["is_latest"], got[BIG]["is_current"]) == (
        "interrupted", True, False)
    assert (got[BIG_OLD]["run_status"], got[BIG_OLD]["is_current"]) == ("complete", True)
    assert (got[DP]["run_status"], got[DP]["is_current"]) == ("unknown", True)


def test_error_logged_after_ready_is_not_a_launch_error(tmp_path):
    rows = raw_rows()
    facts = rows["raw_log_facts"][1]
    facts[:] = [f for f in facts if not (f["run_id"] == BIG and f["fact"] in ("ready", "error"))]
    facts += [_fact(BIG, "ready", 200, value_num=1),
              _fact(BIG, "error", 300, value_text="EngineCore encountered an issue.",
                    detail="EngineDeadError")]
    _, out = derive_into(tmp_path, rows=rows)
    [row] = query(out, "select status, error_type from launches where run_id = $r", {"r": BIG})
    assert row == {"status": "ready", "error_type": None}


# ---------------------------------------------------------------------------------------------
# outputs built beside their place and renamed into it


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


def test_outputs_are_built_beside_and_renamed_into_place(tmp_path, monkeypatch):
    _, out = derive_into(tmp_path)
    (out / "derived" / "stray.csv").write_text("left by hand\n")
    previous = {p: p.read_bytes() for p in (out / "campaign.duckdb", out / "metrics.json",
                                            out / "derived" / "runs.csv")}
    seen = {}
    real_export = derive.export_csv

    def export_and_look(con, derived_dir, schema):
        real_export(con, derived_dir, schema)
        seen["derived_dir"] = derived_dir
        seen["untouched"] = all(p.read_bytes() == b for p, b in previous.items())
        seen["building"] = scratch(out / "campaign.duckdb").is_file()

    monkeypatch.setattr(derive, "export_csv", export_and_look)
    (tmp_path / "warehouse.duckdb").unlink()
    derive_into(tmp_path)
    assert seen == {"derived_dir": scratch(out / "derived"), "untouched": True, "building": True}
    assert not (out / "derived" / "stray.csv").exists()      # the folder was replaced, not written into
    assert sorted(p.name for p in (out / "derived").iterdir()) == sorted(f"{t}.csv" for t in derive.PUBLIC_TABLES)
    assert _leftovers(out) == []
    assert query(out, "select count(*) as n from runs") == [{"n": 4}]


def test_a_failed_build_leaves_every_previous_output_as_it_was(tmp_path, monkeypatch):
    _, out = derive_into(tmp_path)
    files = [out / "campaign.duckdb", out / "metrics.json", *sorted((out / "derived").iterdir())]
    previous = {p: p.read_bytes() for p in files}

    def fail(con):
        raise CampaignError("headline metrics failed")

    monkeypatch.setattr(derive, "headline_metrics", fail)    # after the CSVs are exported
    (tmp_path / "warehouse.duckdb").unlink()
    with pytest.raises(CampaignError, match="headline metrics failed"):
        derive_into(tmp_path)
    assert {p: p.read_bytes() for p in files} == previous
    assert _leftovers(out) == []


def test_leftovers_of_a_killed_derive_are_removed_and_a_live_ones_kept(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    out = tmp_path / "out"
    (out / f".derived.tmp-{gone.pid}-1").mkdir(parents=True)
    (out / f".derived.tmp-{gone.pid}-1" / "runs.csv").write_text("half\n")
    (out / f".campaign.duckdb.tmp-{gone.pid}-1").write_bytes(b"half-built")
    (out / f".campaign.duckdb.tmp-{gone.pid}-1.wal").write_bytes(b"half-built")
    (out / f".derived.old-{gone.pid}-1").mkdir()
    live = out / f".campaign.duckdb.tmp-{os.getppid()}-1"
    live.write_bytes(b"another derive, still building")
    derive_into(tmp_path)
    assert _leftovers(out) == [live.name]

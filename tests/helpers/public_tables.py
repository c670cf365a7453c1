"""The public tables of the render tests' campaign (render_campaign.build_campaign), written by
hand, with the columns and tables they gained later and in the order derive's schema declares."""
from __future__ import annotations

import yaml

from helpers import PROJECT

PUBLIC_DDL = """
create table runs (run_id varchar, spec varchar, profile varchar, model varchar, layout varchar,
  ctx_label varchar, engine varchar, engine_version varchar, image varchar, image_digest varchar,
  executor varchar, started_at timestamptz, finished_at timestamptz, git_sha varchar,
  attempt_group varchar, attempt integer, is_latest boolean, run_status varchar, is_current boolean, recovered boolean,
  tampered boolean, tampered_files varchar, tampered_rows_kept boolean, sealed_by varchar,
  sealed_at timestamptz, source_file varchar, source_line integer, spec_label varchar, gpus varchar,
  gpu_count integer, inferred varchar, imported_from varchar, imported_at timestamptz,
  imported_by varchar, imported_kind varchar);
create table launches (run_id varchar, status varchar, ready_s double, kv_tokens bigint,
  kv_cache_gib double, weights_gib double, load_s double, init_s double, max_model_len bigint,
  max_num_seqs integer, seq_cap integer, engines integer, tp integer, moe_backend varchar,
  attention_backend varchar, error_type varchar, error_message varchar, error_worker varchar,
  kv_cache_dtype varchar, command varchar, kv_source_file varchar, kv_source_line integer,
  ready_source_file varchar, ready_source_line integer, seq_cap_source_file varchar,
  seq_cap_source_line integer, seq_cap_default_source varchar, error_source_file varchar,
  error_source_line integer, source_file varchar, source_line integer);
create table launch_log_facts (run_id varchar, fact varchar, value_num double, value_text varchar,
  detail varchar, source_file varchar, source_line integer);
create table launch_changes (run_id varchar, previous_run_id varchar, change varchar, name varchar,
  old_value varchar, new_value varchar, source_file varchar, source_line integer);
create table point_engine_stats (run_id varchar, point_id varchar, stats_lines bigint,
  running_reqs_max integer, waiting_reqs_max integer, gen_tok_s_max double,
  running_source_file varchar, running_source_line integer, waiting_source_file varchar,
  waiting_source_line integer, gen_source_file varchar, gen_source_line integer);
create table run_events (run_id varchar, event varchar, point_id varchar, detail varchar,
  source_file varchar, source_line integer);
create table gates (run_id varchar, gate varchar, score double, probes integer,
  passed_probes integer, failed_probes integer, provisional boolean, source_file varchar,
  source_line integer);
create table gate_probes (run_id varchar, probe_idx integer, depth double, prompt_tokens integer,
  ok boolean, latency_s double, answer varchar, failure varchar, reasoning_tokens bigint,
  source_file varchar, source_line integer);
create table bench_requests (run_id varchar, point_id varchar, workload varchar,
  concurrency integer, repeat integer, request_idx integer, input_tokens integer, output_tokens integer,
  ttft_s double, latency_s double, start_time_s double, tpot_ms double, prefill_tok_s double,
  error varchar, ok boolean, valid boolean, generated_text varchar, source_file varchar,
  source_line integer);
create table bench_points (run_id varchar, point_id varchar, workload varchar,
  concurrency integer, repeat integer, prompt_tokens integer, output_tokens integer, sent integer,
  completed integer, failed integer, ttft_requests integer, ttft_median_s double, ttft_p90_s double,
  ttft_p99_s double, tpot_median_ms double, tpot_p90_ms double, tpot_p99_ms double, figures_from varchar, decode_tok_s_per_user double, output_tok_s double,
  cache_hit_pct double, invalid_requests integer, seq_limit integer, capacity_limited boolean,
  provisional boolean, source_file varchar, source_line integer);
create table point_repeats (run_id varchar, workload varchar, concurrency integer, repeats integer,
  first_point_id varchar, ttft_median_s double, ttft_median_min_s double, ttft_median_max_s double,
  tpot_median_ms double, tpot_median_min_ms double, tpot_median_max_ms double, output_tok_s double,
  output_tok_min_s double, output_tok_max_s double, completed integer, sent integer);
create table point_gpu_energy (run_id varchar, point_id varchar, gpu_index integer,
  source_file varchar, samples bigint, samples_in_window bigint, avg_power_w double, max_gap_s double,
  start_miss_s double, end_miss_s double, problem varchar, energy_j double, source_line integer,
  last_sample_line integer);
create table point_energy (run_id varchar, point_id varchar, workload varchar, concurrency integer,
  repeat integer, gpus varchar, gpus_in_set bigint, gpus_sampled bigint, samples bigint,
  window_start timestamptz, window_end timestamptz, window_s double, avg_power_per_gpu_w double,
  avg_power_total_w double, max_gap_s double, energy_valid boolean, energy_j double,
  output_tokens bigint, j_per_output_token double, energy_problem varchar, sampler_error varchar,
  source_file varchar, source_line integer, last_sample_line integer, window_start_line integer,
  window_end_line integer, result_file varchar, result_line integer);
create table invalid_rows (run_id varchar, point_id varchar, workload varchar,
  concurrency integer, request_idx integer, reason varchar, detail varchar, value double,
  threshold double, source_file varchar, source_line integer);
create table sequences_fit (run_id varchar, workload varchar, prompt_tokens integer,
  output_tokens integer, context_tokens integer, kv_tokens bigint, engines integer,
  seq_cap integer, fit_by_kv integer, sequences integer, beyond_max_context boolean,
  kv_source_file varchar, kv_source_line integer);
create table turn_requests (run_id varchar, workload varchar, kind varchar, point_id varchar,
  session integer, turn integer, request_idx integer, target_tokens bigint, input_tokens bigint,
  output_tokens bigint, ttft_s double, latency_s double, max_itl_s double, started_s double,
  tpot_ms double, needle_ok boolean, answer varchar, error varchar, ok boolean, burst boolean,
  source_file varchar, source_line integer);
create table ramp_turns (run_id varchar, workload varchar, turn integer, sessions integer,
  answered integer, context_tokens bigint, longest_wait_s double, latency_max_s double,
  needle_found integer, needle_checked integer, cache_hit_pct double, provisional boolean,
  source_file varchar, source_line integer);
create table agent_runs (run_id varchar, workload varchar, sessions integer, turns integer,
  planned integer, sent integer, completed integer, failed integer, history_tokens_max bigint,
  ttft_median_s double, ttft_p90_s double, ttft_p99_s double, tpot_median_ms double,
  decode_tok_s_per_user double, output_tok_s double, cache_hit_pct double, provisional boolean,
  source_file varchar, source_line integer);
create table ingest_errors (run_id varchar, source_file varchar, source_line integer, reason varchar);
create table quarantine (table_name varchar, test varchar, run_id varchar, node_id varchar,
  row_key varchar, source_file varchar, source_line bigint, reason varchar);
create table nodes (node_id varchar, node_kind varchar, status varchar, backend varchar, device varchar,
  gpu_count integer, gpu_name varchar, gpu_memory_total_mib double, driver_version varchar,
  cuda_version varchar, torch_version varchar, nccl_version varchar, nvlink_islands integer,
  nvlink_island_labels varchar, nccl_nvls_enable varchar, started_at timestamptz,
  finished_at timestamptz, git_sha varchar, is_latest boolean, source_file varchar, source_line integer);
create table node_gpus (node_id varchar, gpu_index integer, name varchar, uuid varchar,
  pci_bus_id varchar, memory_total_mib double, power_limit_w double, clocks_max_sm_mhz double,
  driver_version varchar, cpu_affinity varchar, numa_affinity varchar, nvlink_island varchar,
  active_nvlinks integer, nvlink_link_gbs double, source_file varchar, source_line integer);
create table node_topology (node_id varchar, device varchar, peer varchar, gpu_index integer,
  peer_gpu_index integer, link varchar, link_kind varchar, nvlinks integer, same_island boolean,
  source_file varchar, source_line integer);
create table node_p2p (node_id varchar, src_gpu integer, dst_gpu integer, can_access_peer boolean,
  copy_bytes bigint, repeats integer, time_us_median double, copy_gbs double, copy_gbs_max double,
  link varchar, link_kind varchar, same_island boolean, source_file varchar, source_line integer);
create table node_allreduce (node_id varchar, gpu_group varchar, gpus varchar, ranks integer,
  backend varchar, device varchar, dtype varchar, message_bytes bigint, elements bigint,
  iters integer, warmup integer, time_us double, time_us_min double, time_us_max double,
  algbw_gbs double, busbw_gbs double, bus_factor double, correct boolean, spans_islands boolean,
  source_file varchar, source_line integer);
create table node_allreduce_peak (node_id varchar, gpu_group varchar, gpus varchar, ranks integer,
  spans_islands boolean, busbw_gbs double, algbw_gbs double, message_bytes bigint, time_us double,
  sizes_measured integer, min_message_bytes bigint, max_message_bytes bigint, all_correct boolean,
  p2p_copy_gbs double, busbw_p2p_pct double, source_file varchar, source_line integer);
create table point_slo (run_id varchar, point_id varchar, workload varchar, concurrency integer,
  repeat integer, percentile double, ttft_target_s double, tpot_target_ms double,
  slo_judged_requests integer, slo_met_requests integer, slo_share_pct double, duration_s double,
  goodput_req_s double, meets_slo boolean, source_file varchar, source_line integer);
create table slo_concurrency (run_id varchar, workload varchar, percentile double,
  ttft_target_s double, tpot_target_ms double, levels integer, met_concurrency integer,
  met_share_pct double, failed_concurrency integer, failed_share_pct double,
  slo_concurrency double, bracket varchar, goodput_max_req_s double);
create table pareto_points (run_id varchar, point_id varchar, workload varchar, concurrency integer,
  repeat integer, spec varchar, profile varchar, model varchar, layout varchar, engine varchar,
  image varchar, setup varchar, gpu_set varchar, gpus integer, output_tok_s double,
  output_tok_s_per_gpu double, tpot_median_ms double, decode_tok_s_per_user double,
  on_frontier boolean, capacity_limited boolean, provisional boolean, source_file varchar,
  source_line integer, gpus_from varchar, gpus_source_file varchar, gpus_source_line integer,
  gpus_note varchar);
create table pareto_compare (setup varchar, workload varchar, model varchar, layout varchar,
  engine varchar, image varchar, gpus integer, compare_user_tok_s double,
  compare_user_tok_s_setting varchar, frontier_points integer, frontier_min_decode_tok_s_per_user double, frontier_max_decode_tok_s_per_user double,
  bracketed boolean, reach varchar, output_tok_s_per_gpu double, lower_run_id varchar,
  lower_point_id varchar, lower_decode_tok_s_per_user double, lower_output_tok_s_per_gpu double,
  upper_run_id varchar, upper_point_id varchar, upper_decode_tok_s_per_user double,
  upper_output_tok_s_per_gpu double, source_file varchar, source_line integer, upper_file varchar,
  upper_line integer);
create table point_cost (run_id varchar, point_id varchar, workload varchar, concurrency integer,
  setup varchar, price_set varchar, price_source varchar, usd_per_gpu_hour double, gpus integer,
  output_tok_s double, output_tokens_per_hour double, usd_per_million_output_tokens double,
  source_file varchar, source_line integer, gpus_note varchar);
create table run_inferred (run_id varchar, field varchar, value varchar, how varchar,
  source_file varchar, source_line integer);
create table point_profile (run_id varchar, point_id varchar, workload varchar, concurrency integer,
  kind varchar, counted varchar, events integer, total_us double, share_pct double,
  trace_files integer, source_file varchar, top_note varchar);
create table run_timeline (run_id varchar, phase_order integer, phase varchar, step varchar,
  start_at timestamptz, end_at timestamptz, seconds double, prompts_waited_s double,
  estimated boolean, source_file varchar, source_line integer);
create table run_phases (run_id varchar, phase varchar, first_order integer, phases integer,
  seconds double, share_pct double, run_s double, gpu_count integer, gpu_hours double,
  estimated boolean);
create table point_client_time (run_id varchar, point_id varchar, workload varchar,
  concurrency integer, repeat integer, step_s double, client_prep_s double, requests_s double,
  tail_s double, client_s double, client_share_pct double, prompts_waited_s double,
  client_paced boolean, client_pace_max_pct double, estimated boolean, source_file varchar,
  source_line integer);
create table launch_plans (run_id varchar, spec varchar, model varchar, engine varchar,
  engine_version varchar, status varchar, verdict varchar, why varchar, basis varchar,
  budget_gib double, reserve_gib double, planned_weights_gib double, weights_gib double,
  weights_err_pct double, planned_kv_cache_gib double, kv_cache_gib double, kv_cache_err_pct double,
  planned_kv_tokens bigint, kv_tokens bigint, kv_tokens_err_pct double, planned_concurrency_x double,
  planned_ready_s double, ready_s double, ready_err_pct double, planned_run_s double, run_s double,
  run_err_pct double, failed_for_memory boolean, source_file varchar, source_line integer,
  foreseen boolean);
"""


def in_schema_order(con) -> None:
    """Each stand-in table's columns in the order derive's schema declares them (columns added
    later by add_later_columns land at the end; derive places some among the others)."""
    schema = yaml.safe_load((PROJECT / "stages" / "derive" / "sql" / "marts" / "schema.yaml").read_text())
    tables = {t for (t,) in con.execute("select table_name from information_schema.tables").fetchall()}
    for table, spec in schema.items():
        if table not in tables or not isinstance(spec, dict) or "columns" not in spec:
            continue
        have = [c for (c,) in con.execute("select column_name from information_schema.columns "
                                          "where table_name = ? order by ordinal_position", [table]).fetchall()]
        order = [c for c in spec["columns"] if c in have] + [c for c in have if c not in spec["columns"]]
        if order != have:
            con.execute(f"create or replace table {table} as select {', '.join(order)} from {table}")


def add_later_columns(con) -> None:
    """The columns and tables the public tables gained after the hand-written ones above, as
    derive makes them: every point's TPOT from its requests' latencies, nothing left out of
    the setups' comparison, and no /metrics series sampled."""
    for table, column, kind, default in (
            ("bench_points", "tpot_from", "varchar", "'latencies'"),
            ("bench_requests", "tpot_from", "varchar", "'latencies'"),
            ("bench_requests", "latency_from", "varchar", "'latencies'"),
            ("point_energy", "window_from", "varchar", "'requests'"),
            ("point_energy", "sampler_window_s", "double", "null"),
            ("point_energy", "bench_duration_s", "double", "null"),
            ("point_energy", "idle_power_total_w", "double", "null"),
            ("point_energy", "idle_samples", "bigint", "0"),
            ("point_energy", "window_source_file", "varchar", "null"),
            ("point_gpu_energy", "idle_power_w", "double", "null"),
            ("point_gpu_energy", "idle_samples", "bigint", "0"),
            ("bench_points", "tool", "varchar", "'vllm bench serve'"),
            ("bench_points", "tool_version", "varchar", "null"),
            ("bench_points", "summary_paths", "varchar", "null"),
            ("bench_points", "tool_note", "varchar", "null"),
            ("bench_requests", "record_path", "varchar", "null"),
            ("bench_requests", "field_paths", "varchar", "null"),
            ("launches", "linear_kernel", "varchar", "null"),
            ("launches", "max_concurrency_x", "double", "null"),
            ("invalid_rows", "excludes_ttft", "boolean", "false"),
            ("invalid_rows", "excludes_tpot", "boolean", "false")):
        con.execute(f"alter table {table} add column if not exists {column} {kind} default {default}")
    # what each request counts for and why not, as derive's bench_requests makes it from invalid_rows
    same = ("i.run_id = bench_requests.run_id and i.point_id = bench_requests.point_id"
            " and i.request_idx = bench_requests.request_idx")
    for column, flag in (("counts_for_ttft", "excludes_ttft"), ("counts_for_tpot", "excludes_tpot")):
        con.execute(f"alter table bench_requests add column if not exists {column} boolean")
        con.execute(f"update bench_requests set {column} = ok and not exists"
                    f" (select 1 from invalid_rows as i where {same} and i.{flag})")
    con.execute("alter table bench_requests add column if not exists invalid_reasons varchar")
    con.execute("update bench_requests set invalid_reasons = (select string_agg(i.reason, ', ' order by i.reason)"
                f" from invalid_rows as i where {same})")
    # each point's prefill rate over its repeats, as derive's point_repeats takes it from bench_requests
    con.execute("alter table point_repeats add column if not exists prefill_tok_s double")
    con.execute("alter table point_repeats add column if not exists prefill_requests integer default 0")
    con.execute("update point_repeats set prefill_tok_s = q.rate, prefill_requests = q.n from"
                " (select run_id, workload, concurrency, median(prefill_tok_s) as rate, count(prefill_tok_s) as n"
                "  from bench_requests where counts_for_ttft group by all) as q"
                " where q.run_id = point_repeats.run_id and q.workload = point_repeats.workload"
                " and q.concurrency = point_repeats.concurrency")
    # each figure's own line in its result file: the record's line, the files being one line each
    for table, column, line in (("bench_points", "concurrency_line", "source_line"),
                                ("bench_points", "output_tok_s_line", "source_line"),
                                ("pareto_points", "concurrency_line", "source_line"),
                                ("point_energy", "output_tokens_line", "result_line"),
                                ("point_energy", "bench_duration_line", "result_line")):
        con.execute(f"alter table {table} add column if not exists {column} integer")
        con.execute(f"update {table} set {column} = {line}")
    # bench_points.cached and the counts of requests left out, in derive's column order: the counts
    # as derive makes them from invalid_rows, cached as it judges it with rules.cached_mark_pct of 10
    con.execute("alter table bench_points add column if not exists cached boolean default false")
    for column, where in (("ttft_left_out", "i.excludes_ttft"),
                          ("prefix_cache_requests", "i.reason = 'prefix_cache'")):
        con.execute(f"alter table bench_points add column if not exists {column} integer default 0")
        con.execute(f"update bench_points set {column} = (select count(distinct i.request_idx)"
                    " from invalid_rows as i where i.run_id = bench_points.run_id"
                    f" and i.point_id = bench_points.point_id and {where})")
    con.execute("update bench_points set cached = coalesce(cache_hit_pct >= 10, false)"
                " or prefix_cache_requests > 0")
    # the requests point_slo judges (none: the fixture's workloads have no objectives)
    con.execute("create table if not exists slo_requests (run_id varchar, point_id varchar,"
                " request_idx integer, workload varchar, concurrency integer, repeat integer,"
                " judged boolean, not_judged_reason varchar, failed boolean, ttft_over_target boolean,"
                " tpot_over_target boolean, met boolean, source_file varchar, source_line integer)")
    con.execute("create table if not exists pareto_left_out (run_id varchar, point_id varchar,"
                " workload varchar, concurrency integer, repeat integer, spec varchar, model varchar,"
                " setup varchar, gpu_set varchar, reason varchar, source_file varchar, source_line integer)")
    con.execute("create table if not exists point_metrics_series (run_id varchar, point_id varchar,"
                " workload varchar, concurrency integer, repeat integer, sample_idx integer,"
                " sampled_at timestamptz, seconds double, in_requests boolean, running bigint, waiting bigint,"
                " kv_usage_pct double, gen_tok_s double, prompt_tok_s double, rate_from_s double,"
                " preemptions bigint, generation_tokens_total double, error varchar, source_file varchar,"
                " source_line integer, running_line integer, waiting_line integer, kv_line integer)")
    con.execute("create table if not exists point_metrics_summary (run_id varchar, point_id varchar,"
                " workload varchar, concurrency integer, repeat integer, samples bigint, error_samples bigint,"
                " readings bigint, running_max bigint, waiting_max bigint, kv_usage_max_pct double,"
                " preemptions bigint, stalled_s double, gen_tok_s_while_running double, queued boolean,"
                " preempted boolean, interval_ms double, sampler_exit varchar, source_file varchar,"
                " source_line integer, waiting_source_file varchar, waiting_source_line integer,"
                " kv_source_file varchar, kv_source_line integer, requests_s double, window_readings bigint,"
                " sampled_enough boolean, series_min_readings integer, stall_min_samples integer,"
                " queue_seen boolean, seq_cap bigint, over_seq_cap boolean, queue_missed boolean)")

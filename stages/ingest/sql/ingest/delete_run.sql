-- Remove every raw row of one run folder before it is read again (or after it is gone).
-- raw_seals is kept: a folder that comes back is checked against the seal it had.
delete from raw_runs where run_id = $run_id;
delete from raw_run_inferred where run_id = $run_id;
delete from raw_profile_kinds where run_id = $run_id;
delete from raw_commands where run_id = $run_id;
delete from raw_command_flags where run_id = $run_id;
delete from raw_launch_out where run_id = $run_id;
delete from raw_log_facts where run_id = $run_id;
delete from raw_log_stats where run_id = $run_id;
delete from raw_gate_probes where run_id = $run_id;
delete from raw_gates where run_id = $run_id;
delete from raw_bench_points where run_id = $run_id;
delete from raw_bench_requests where run_id = $run_id;
delete from raw_metrics where run_id = $run_id;
delete from raw_metrics_series where run_id = $run_id;
delete from raw_sampler_settings where run_id = $run_id;
delete from raw_gpu_samples where run_id = $run_id;
delete from raw_turn_workloads where run_id = $run_id;
delete from raw_turn_requests where run_id = $run_id;
delete from raw_tampered where run_id = $run_id;
delete from ingest_errors where run_id = $run_id;
delete from raw_folders where run_id = $run_id;

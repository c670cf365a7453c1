-- One row per benchmark point of a reported attempt (runs.is_current) that pareto_points does not
-- place, with the first reason that keeps it out, in this order:
--   'no GPU set'            nothing says how many GPUs the run took (runs.gpu_count: meta.json
--                           gpus, or read from the folder), so no throughput per GPU;
--   'no workload'           its result file names no workload;
--   'no request completed'  every request it sent failed (a result file that gives no count of
--                           completed requests is judged by its figures);
--   'no decode speed'       no time per output token: its result file holds no per-request times
--                           to compute one from (no latencies, no itls) and no summary figure, or
--                           every request's output came in one burst (invalid_rows burst_output);
--   'no output throughput'  its result file gives no output tokens/s.
-- A capacity-limited point is placed (pareto_points.capacity_limited), not left out. The reason
-- is int_pareto_candidates.left_out_reason, the rule pareto_points places by.
with final as (
    select
        run_id,
        point_id,
        workload,
        concurrency,
        repeat,
        spec,
        model,
        setup,
        gpu_set,
        left_out_reason                                             as reason,
        source_file,
        source_line
    from int_pareto_candidates
    where left_out_reason is not null
)

select * from final

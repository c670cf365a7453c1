-- One row per benchmark point of a reported attempt (runs.is_current) that pareto_points does not
-- place, with the first reason that keeps it out, in this order:
--   'no GPU set'            nothing says how many GPUs the run took (runs.gpu_count: meta.json
--                           gpus, or read from the folder), so no throughput per GPU;
--   'no workload'           its result file names no workload;
--   'no request completed'  every request it sent failed;
--   'no decode speed'       no time per output token: its result file holds no per-request times
--                           to compute one from (no latencies, no itls) and no summary figure, or
--                           every request's output came in one burst (invalid_rows burst_output);
--   'no output throughput'  its result file gives no output tokens/s.
-- A capacity-limited point is placed (pareto_points.capacity_limited), not left out.
with judged as (
    select
        *,
        case
            when coalesce(gpus, 0) = 0 then 'no GPU set'
            when workload is null then 'no workload'
            when coalesce(completed, 0) = 0 then 'no request completed'
            when not coalesce(decode_tok_s_per_user > 0, false) then 'no decode speed'
            when not coalesce(output_tok_s > 0, false) then 'no output throughput'
        end                                                         as reason
    from int_pareto_candidates
),

final as (
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
        reason,
        source_file,
        source_line
    from judged
    where reason is not null
)

select * from final

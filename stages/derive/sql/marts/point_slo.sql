-- One row per benchmark point whose workload has service level objectives (params.yaml `slo`,
-- the run's own profile's: int_slo_targets): how many of its requests met them, as
-- slo_requests judges each (judged unless served from the prefix cache; met when it completed
-- within the targets).
-- slo_share_pct = 100 * slo_met_requests / slo_judged_requests; null when none was judged (a
--   point whose file has no per-request timings).
-- goodput_req_s = slo_met_requests / duration_s (the benchmark's own duration of the point).
-- meets_slo: slo_share_pct is at least the workload's percentile.
with points as (
    select run_id, point_id, workload, concurrency, repeat, source_file, source_line
    from bench_points
),

durations as (
    select run_id, point_id, duration_s from stg_bench_points
),

targets as (
    select
        points.*,
        slo.percentile,
        slo.ttft_target_s,
        slo.tpot_target_ms
    from points
    inner join int_slo_targets as slo
        on slo.run_id = points.run_id and slo.point_id = points.point_id
),

counted as (
    select
        run_id,
        point_id,
        count(*) filter (where judged)                  as judged_requests,
        count(*) filter (where judged and met)          as met_requests
    from slo_requests
    group by run_id, point_id
),

final as (
    select
        targets.run_id,
        targets.point_id,
        targets.workload,
        targets.concurrency,
        targets.repeat,
        targets.percentile::double                                      as percentile,
        targets.ttft_target_s::double                                   as ttft_target_s,
        targets.tpot_target_ms::double                                  as tpot_target_ms,
        coalesce(counted.judged_requests, 0)::integer                   as slo_judged_requests,
        coalesce(counted.met_requests, 0)::integer                      as slo_met_requests,
        (100.0 * counted.met_requests / nullif(counted.judged_requests, 0))::double as slo_share_pct,
        durations.duration_s,
        case when counted.judged_requests > 0 and durations.duration_s > 0
             then counted.met_requests / durations.duration_s end::double as goodput_req_s,
        case when counted.judged_requests > 0
             then 100.0 * counted.met_requests / counted.judged_requests >= targets.percentile
        end                                                             as meets_slo,
        targets.source_file,
        targets.source_line
    from targets
    left join counted
        on counted.run_id = targets.run_id and counted.point_id = targets.point_id
    left join durations
        on durations.run_id = targets.run_id and durations.point_id = targets.point_id
)

select * from final

-- The caveats a printed number may rest on, for stages/render/marks.py: one row per benchmark
-- point (point_id set) with its marks as derive judged them, and one row per run (point_id null)
-- that is provisional where any of its points, sessions or ramp turns is (all from the run's gate,
-- int_run_gate_flags). one_request: a statistic of the point is over a single request (the requests
-- its TTFT figures are computed from, or those it completed, number one).
with points as (
    select
        run_id,
        point_id,
        workload,
        concurrency,
        provisional,
        capacity_limited,
        cached,
        coalesce(ttft_requests = 1, false) or coalesce(completed = 1, false) as one_request
    from bench_points
),

run_flags as (
    select run_id, provisional from bench_points
    union all
    select run_id, provisional from agent_runs
    union all
    select run_id, provisional from ramp_turns
),

runs as (
    select
        run_id,
        cast(null as varchar)                                       as point_id,
        cast(null as varchar)                                       as workload,
        cast(null as integer)                                       as concurrency,
        coalesce(bool_or(provisional), false)                       as provisional,
        false                                                       as capacity_limited,
        false                                                       as cached,
        false                                                       as one_request
    from run_flags
    group by run_id
),

final as (
    select * from points
    union all
    select * from runs
)

select * from final
order by run_id, point_id nulls first

-- Capacity-limited points of one model's reported attempts: more users than sequences that fit,
-- so their first tokens mostly measure queueing; with the engine's own stats where logged.
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
    where is_current
),

final as (
    select
        p.run_id,
        a.spec,
        p.point_id,
        p.workload,
        p.concurrency,
        s.run_id is not null as has_stats
    from bench_points as p
    inner join attempts as a on a.run_id = p.run_id
    left join point_engine_stats as s on s.run_id = p.run_id and s.point_id = p.point_id
    where p.capacity_limited
    order by a.started_at, p.run_id, p.workload, p.concurrency
)

select * from final

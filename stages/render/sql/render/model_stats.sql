-- Points of one model's reported attempts during which the engine logged its stats lines.
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
    where is_current
),

final as (
    select
        s.run_id,
        a.spec,
        s.point_id,
        p.workload,
        p.concurrency
    from point_engine_stats as s
    inner join bench_points as p on p.run_id = s.run_id and p.point_id = s.point_id
    inner join attempts as a on a.run_id = s.run_id
    order by a.started_at, s.run_id, p.workload, p.concurrency
)

select * from final

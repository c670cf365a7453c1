-- Points of one model in a Part (section_points) during which the engine's own /metrics
-- (point_metrics_summary) saw requests running with no token generated (a stall) or a preemption.
with final as (
    select p.run_id, p.spec, p.point_id, p.workload, p.concurrency
    from section_points($run_ids::varchar[], $model) as p
    inner join point_metrics_summary as m on m.run_id = p.run_id and m.point_id = p.point_id
    where m.stalled_s > 0 or m.preempted
    order by p.started_at, p.run_id, p.workload, p.concurrency
)

select * from final

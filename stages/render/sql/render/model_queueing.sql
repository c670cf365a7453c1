-- Capacity-limited points of one model in a Part (section_points): more users than sequences
-- that fit, so their first tokens mostly measure queueing. metrics_said: whether the engine's own
-- /metrics (point_metrics_summary) saw requests wait or a preemption during the point, in words.
with final as (
    select
        p.run_id,
        p.spec,
        p.point_id,
        p.workload,
        p.concurrency,
        case
            when m.point_id is null then 'not sampled'
            when m.queued and m.preempted then 'queued and preempted'
            when m.queued then 'queued'
            when m.preempted then 'preempted'
            else 'neither queued nor preempted'
        end                                             as metrics_said
    from section_points($run_ids::varchar[], $model) as p
    left join point_metrics_summary as m on m.run_id = p.run_id and m.point_id = p.point_id
    where p.capacity_limited
    order by p.started_at, p.run_id, p.workload, p.concurrency
)

select * from final

-- Capacity-limited points of one model in a Part (section_points): more users than sequences
-- that fit, so their first tokens mostly measure queueing. metrics_said: what the engine's own
-- /metrics (point_metrics_summary) says of the point's queue and preemptions, in words, judged as
-- derive judges it, from the counters and the sequence cap together: a point over the cap queued
-- whether or not a sample caught it, and where none did (queue_missed) the words say the counters
-- missed it; the page says how often they were read (window_readings over requests_s).
-- "neither queued nor preempted" is said only of a point within the cap (limited by its KV pool)
-- whose samples saw neither.
with final as (
    select
        p.run_id,
        p.spec,
        p.point_id,
        p.workload,
        p.concurrency,
        case
            when m.point_id is null then 'not sampled'
            when m.queue_missed and m.preempted then 'queued, missed by the counters; preempted'
            when m.queue_missed then 'queued, missed by the counters'
            when m.queued and m.preempted then 'queued and preempted'
            when m.queued then 'queued'
            when m.preempted then 'preempted'
            else 'neither queued nor preempted'
        end                                             as metrics_said,
        coalesce(m.queue_missed, false)                 as queue_missed,
        m.requests_s is not null                        as timed
    from section_points($run_ids::varchar[], $model) as p
    left join point_metrics_summary as m
        on m.run_id = p.run_id and m.point_id = p.point_id
    where p.capacity_limited
    order by p.started_at, p.run_id, p.workload, p.concurrency
)

select * from final

-- The point whose requests the timeline draws (timeline_point), when the engine's /metrics was
-- sampled through it (point_metrics_summary), with whether its sampling read it often enough to
-- draw its series (sampled_enough: derive's rule, series_min_readings) and, where not, the reads
-- to say so with.
with final as (
    select t.run_id, t.spec, t.point_id, t.workload, t.concurrency, m.sampled_enough,
           m.requests_s is not null                     as timed
    from timeline_point($run_ids::varchar[], $model) as t
    inner join point_metrics_summary as m on m.run_id = t.run_id and m.point_id = t.point_id
)

select * from final

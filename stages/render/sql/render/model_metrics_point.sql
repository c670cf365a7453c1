-- The point whose requests the timeline draws (timeline_point), when the engine's /metrics was
-- sampled through it (point_metrics_summary).
with final as (
    select t.run_id, t.spec, t.point_id, t.workload, t.concurrency
    from timeline_point($run_ids::varchar[], $model) as t
    semi join point_metrics_summary as m on m.run_id = t.run_id and m.point_id = t.point_id
)

select * from final

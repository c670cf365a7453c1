-- Points of one model in a Part (section_points) during which the engine logged stats lines.
with final as (
    select p.run_id, p.spec, p.point_id, p.workload, p.concurrency
    from section_points($run_ids::varchar[], $model) as p
    semi join point_engine_stats as s on s.run_id = p.run_id and s.point_id = p.point_id
    order by p.started_at, p.run_id, p.workload, p.concurrency
)

select * from final

-- Requests of one model's points in a Part (section_points) left out of a statistic: one row
-- per point and reason.
with final as (
    select p.run_id, p.spec, p.point_id, p.workload, p.concurrency, i.reason, p.started_at
    from section_points($run_ids::varchar[], $model) as p
    inner join invalid_rows as i on i.run_id = p.run_id and i.point_id = p.point_id
    group by p.run_id, p.spec, p.point_id, p.workload, p.concurrency, i.reason, p.started_at
    order by p.started_at, p.run_id, p.workload, p.concurrency, i.reason
)

select * exclude (started_at) from final

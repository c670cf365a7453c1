-- A model's benchmark points (section_points: each point's first repeat) where the client, not the
-- engine, set the pace (point_client_time.client_paced, by rules.client_pace_max_pct), with
-- whether their times are estimated from the GPU samplers.
with final as (
    select
        p.run_id, p.point_id, p.workload, p.concurrency, c.estimated, p.started_at
    from section_points($run_ids::varchar[], $model) as p
    inner join point_client_time as c on c.run_id = p.run_id and c.point_id = p.point_id
    where c.client_paced
    order by p.started_at, p.run_id, p.workload, p.concurrency
)

select * exclude (started_at) from final

-- Bench points of the reported attempt of each spec of one model in a Part, labelled by spec
-- (and image, where one spec ran under several) for colour.
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
    where is_current
),

final as (
    select
        p.*,
        a.spec as series,
        a.started_at
    from bench_points as p
    inner join attempts as a on a.run_id = p.run_id
    order by a.spec, p.workload, p.concurrency
)

select * exclude (started_at) from final

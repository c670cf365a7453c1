-- Requests of one model's reported points left out of a statistic, counted by point and reason.
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
    where is_current
),

final as (
    select distinct
        i.run_id,
        a.spec,
        i.point_id,
        i.workload,
        i.concurrency,
        i.reason
    from invalid_rows as i
    inner join attempts as a on a.run_id = i.run_id
    order by i.run_id, i.workload, i.concurrency, i.reason
)

select * from final

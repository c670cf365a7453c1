-- Capacity-limited points of one model in a Part (section_points): more users than sequences
-- that fit, so their first tokens mostly measure queueing.
with final as (
    select run_id, spec, point_id, workload, concurrency
    from section_points($run_ids::varchar[], $model)
    where capacity_limited
    order by started_at, run_id, workload, concurrency
)

select * from final

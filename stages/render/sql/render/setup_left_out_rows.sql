-- The Part's runs ($run_ids) and the reasons their benchmark points are left out of the setup
-- comparison (pareto_left_out), one row per run and reason, with the points it holds.
with final as (
    select
        run_id,
        reason,
        string_agg(point_id, ', ' order by workload, concurrency, point_id) as point_ids
    from pareto_left_out
    where list_contains($run_ids::varchar[], run_id)
    group by run_id, reason
    order by run_id, reason
)

select * from final

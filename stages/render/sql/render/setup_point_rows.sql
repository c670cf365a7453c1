-- Every point of one workload among the Part's runs ($run_ids), by setup and decode speed, with
-- whether it is on its setup's frontier.
with final as (
    select
        run_id,
        point_id,
        workload,
        concurrency,
        setup,
        case when on_frontier then 'yes' else 'no' end              as frontier,
        case when capacity_limited then 'capacity-limited' else '' end as load
    from pareto_points
    where list_contains($run_ids::varchar[], run_id) and workload = $workload
    order by setup, decode_tok_s_per_user desc, point_id
)

select * from final

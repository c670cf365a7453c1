-- Every point of one workload among the Part's runs ($run_ids), by setup and decode speed, with
-- whether it is on its setup's frontier; `spec` is the run's name on the pages (runs.spec_label).
with final as (
    select
        p.run_id,
        r.spec_label                                                     as spec,
        p.point_id,
        p.workload,
        p.concurrency,
        p.setup,
        case when p.on_frontier then 'yes' else 'no' end                 as frontier,
        case when p.capacity_limited then 'capacity-limited' else '' end as load
    from pareto_points as p
    inner join runs as r on r.run_id = p.run_id
    where list_contains($run_ids::varchar[], p.run_id) and p.workload = $workload
    order by p.setup, p.decode_tok_s_per_user desc, p.point_id
)

select * from final

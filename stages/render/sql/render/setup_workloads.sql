-- The workloads the Part's runs ($run_ids) measured on a known GPU set (pareto_points), most
-- setups first: one Pareto chart and comparison each.
with final as (
    select workload, count(distinct setup) as setups
    from pareto_points
    where list_contains($run_ids::varchar[], run_id)
    group by workload
    order by setups desc, workload
)

select * from final

-- The decode speed per user at which setups are compared along their Pareto frontiers for one
-- workload (params.yaml pareto.workloads.<workload>, else pareto.compare_user_tok_s, as derive read
-- it into pareto_compare).
with final as (
    select
        max(compare_user_tok_s) as value,
        'tok/s per user' as unit,
        cast(null as varchar) as run_id,
        'A setting: params.yaml ' || any_value(compare_user_tok_s_setting) || '.' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from pareto_compare
    where workload = $workload
)

select * from final

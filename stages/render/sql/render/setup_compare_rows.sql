-- One row per setup of the Part's runs ($run_ids) for one workload: how its frontier reads at the
-- compared speed (pareto_compare), in words.
with shown as (
    select distinct setup from pareto_points
    where list_contains($run_ids::varchar[], run_id) and workload = $workload
),

final as (
    select
        c.setup,
        c.workload,
        case c.reach
            when 'bracketed' then 'interpolated between the two frontier points around it'
            when 'below' then 'not reached: every frontier point is slower per user'
            when 'above' then 'not bracketed: every frontier point is faster per user'
            else 'no speed set'
        end as reading
    from pareto_compare as c
    inner join shown using (setup)
    where c.workload = $workload
    order by c.bracketed desc, c.output_tok_s_per_gpu desc nulls last, c.setup
)

select * from final

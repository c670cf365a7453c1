-- Benchmark points of one run that the setup comparison leaves out for one reason
-- (pareto_left_out).
with left_out as (
    select point_id
    from pareto_left_out
    where run_id = $run_id and reason = $reason
),

final as (
    select
        count(*) as value,
        'points' as unit,
        $run_id as run_id,
        'Counted over the rows of pareto_left_out for the run and reason.' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from left_out
)

select * from final

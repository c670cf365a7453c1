-- Turns of a ramp at which every session's answer held the needle planted in turn 1.
with source as (
    select *
    from ramp_turns
    where run_id = $run_id and workload = $workload
),

final as (
    select
        count(*) filter (where needle_found = sessions) as value,
        'turns' as unit,
        any_value(run_id) as run_id,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from source
)

select * from final

-- Turns a ramp ran (turns with at least one request).
with source as (
    select *
    from ramp_turns
    where run_id = $run_id and workload = $workload
),

final as (
    select
        count(*) as value,
        'turns' as unit,
        any_value(run_id) as run_id,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from source
)

select * from final

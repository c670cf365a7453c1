-- The turn of a ramp at which a user waited longest for the first token.
with source as (
    select *
    from ramp_turns
    where run_id = $run_id and workload = $workload and longest_wait_s is not null
    order by longest_wait_s desc, turn
    limit 1
),

final as (
    select
        turn as value,
        'turn' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

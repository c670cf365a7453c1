-- The number of a ramp turn, counted from one.
with source as (
    select *
    from ramp_turns
    where run_id = $run_id and workload = $workload and turn = $turn
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

-- Sessions whose answer at a ramp turn held the needle planted in turn 1.
with source as (
    select *
    from ramp_turns
    where run_id = $run_id and workload = $workload and turn = $turn
),

final as (
    select
        needle_found as value,
        'sessions' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

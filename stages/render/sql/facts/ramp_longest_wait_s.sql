-- The longest wait for a first token over every turn of a ramp, with the turn it happened at.
with source as (
    select *
    from ramp_turns
    where run_id = $run_id and workload = $workload and longest_wait_s is not null
    order by longest_wait_s desc, turn
    limit 1
),

final as (
    select
        longest_wait_s as value,
        's' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

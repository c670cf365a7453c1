-- Length of the conversation at the last turn of a ramp.
with source as (
    select *
    from ramp_turns
    where run_id = $run_id and workload = $workload
    order by turn desc
    limit 1
),

final as (
    select
        context_tokens as value,
        'tokens' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

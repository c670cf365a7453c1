-- Output tokens per second of all agent sessions together, over the workload's wall time.
with source as (
    select *
    from agent_runs
    where run_id = $run_id and workload = $workload
),

final as (
    select
        output_tok_s as value,
        'tok/s' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

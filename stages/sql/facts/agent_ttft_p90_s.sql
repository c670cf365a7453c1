-- p90 of the time to the first token over the agent sessions' completed requests.
with source as (
    select *
    from agent_runs
    where run_id = $run_id and workload = $workload
),

final as (
    select
        ttft_p90_s as value,
        's' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

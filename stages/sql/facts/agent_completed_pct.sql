-- Share of the agent sessions' requests that completed.
with source as (
    select *
    from agent_runs
    where run_id = $run_id and workload = $workload
),

final as (
    select
        100.0 * completed / nullif(sent, 0) as value,
        '%' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

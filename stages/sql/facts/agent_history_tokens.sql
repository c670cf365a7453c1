-- The longest prompt any agent session sent: the shared history plus its own turns.
with source as (
    select *
    from agent_runs
    where run_id = $run_id and workload = $workload
),

final as (
    select
        history_tokens_max as value,
        'tokens' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

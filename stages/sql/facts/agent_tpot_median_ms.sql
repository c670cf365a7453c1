-- Median time per output token of the agent sessions (requests whose output came in one burst left out).
with source as (
    select *
    from agent_runs
    where run_id = $run_id and workload = $workload
),

final as (
    select
        tpot_median_ms as value,
        'ms' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

-- Share of the agent sessions' prompt tokens the engine served from its prefix cache (its /metrics counters).
with source as (
    select *
    from agent_runs
    where run_id = $run_id and workload = $workload
),

final as (
    select
        cache_hit_pct as value,
        '%' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

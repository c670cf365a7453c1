-- Decode speed per session: 1000 / median time per output token (requests whose output came in one burst left out).
with source as (
    select *
    from agent_runs
    where run_id = $run_id and workload = $workload
),

final as (
    select
        decode_tok_s_per_user as value,
        'tok/s' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

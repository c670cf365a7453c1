-- Prompt length of one needle probe, tokens.
with source as (
    select *
    from gate_probes
    where run_id = $run_id and probe_idx = $probe_idx
),

final as (
    select
        prompt_tokens as value,
        'tokens' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

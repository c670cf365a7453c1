-- niah.log probes.
with source as (
    select * from raw.raw_gate_probes
),

final as (
    select
        run_id::varchar               as run_id,
        probe_idx::integer            as probe_idx,
        needle_key::varchar           as needle_key,
        depth::double                 as depth,
        prompt_tokens::bigint         as prompt_tokens,
        ok::boolean                   as ok,
        latency_s::double             as latency_s,
        answer::varchar               as answer,
        failure::varchar              as failure,
        reasoning_tokens::bigint      as reasoning_tokens,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

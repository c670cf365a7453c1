-- Periodic engine statistics lines.
with source as (
    select * from raw.raw_log_stats
),

final as (
    select
        run_id::varchar               as run_id,
        engine_idx::integer           as engine_idx,
        kind::varchar                 as kind,
        log_time::varchar             as log_time,
        prompt_tok_s::double          as prompt_tok_s,
        gen_tok_s::double             as gen_tok_s,
        running_reqs::integer         as running_reqs,
        waiting_reqs::integer         as waiting_reqs,
        kv_usage_pct::double          as kv_usage_pct,
        prefix_hit_pct::double        as prefix_hit_pct,
        new_tokens::bigint            as new_tokens,
        cached_tokens::bigint         as cached_tokens,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

-- The ready launches of one model in a Part, with which startup figures the launches table says
-- they logged and the kernels the engine chose.
with final as (
    select
        a.run_id,
        a.spec,
        l.kv_tokens is not null                       as has_kv_tokens,
        l.ready_s is not null                         as has_ready_s,
        l.weights_gib is not null                     as has_weights,
        l.kv_cache_gib is not null                    as has_kv_memory,
        l.load_s is not null                          as has_load,
        l.max_concurrency_x is not null               as has_concurrency,
        l.moe_backend,
        l.attention_backend,
        l.linear_kernel
    from section_runs($run_ids::varchar[], $model) as a
    inner join launches as l on l.run_id = a.run_id
    where a.status = 'ready'
    order by a.started_at, a.run_id
)

select * from final

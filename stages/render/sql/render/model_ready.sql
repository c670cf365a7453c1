-- The ready launches of one model in a Part, with the kernels and backends the engine chose.
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
),

choices as (
    select
        run_id,
        max(value_text) filter (where fact = 'moe_backend')       as moe_backend,
        max(value_text) filter (where fact = 'attention_backend') as attention_backend,
        max(value_text) filter (where fact = 'linear_kernel')     as linear_kernel,
        bool_or(fact = 'weights_gib')                             as has_weights,
        bool_or(fact = 'kv_memory_gib')                           as has_kv_memory,
        bool_or(fact = 'max_concurrency_x')                       as has_concurrency,
        bool_or(fact = 'load_s')                                  as has_load
    from launch_log_facts
    group by run_id
),

final as (
    select
        a.run_id,
        a.spec,
        a.image,
        a.is_current,
        l.kv_tokens is not null                       as has_kv_tokens,
        l.ready_s is not null                         as has_ready_s,
        coalesce(choices.has_weights, false)          as has_weights,
        coalesce(choices.has_kv_memory, false)        as has_kv_memory,
        coalesce(choices.has_concurrency, false)      as has_concurrency,
        coalesce(choices.has_load, false)             as has_load,
        choices.moe_backend,
        choices.attention_backend,
        choices.linear_kernel
    from attempts as a
    inner join launches as l on l.run_id = a.run_id
    left join choices on choices.run_id = a.run_id
    where a.status = 'ready'
    order by a.started_at, a.run_id
)

select * from final

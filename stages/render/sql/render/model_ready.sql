-- The ready launches of one model in a Part, with what the launches table says they logged and
-- the two startup figures only launch_log_facts holds (the linear kernel, the concurrency estimate).
with logged as (
    select
        run_id,
        max(value_text) filter (where fact = 'linear_kernel') as linear_kernel,
        bool_or(fact = 'max_concurrency_x')                   as has_concurrency
    from launch_log_facts
    group by run_id
),

final as (
    select
        a.run_id,
        a.spec,
        l.kv_tokens is not null                       as has_kv_tokens,
        l.ready_s is not null                         as has_ready_s,
        l.weights_gib is not null                     as has_weights,
        l.kv_cache_gib is not null                    as has_kv_memory,
        l.load_s is not null                          as has_load,
        coalesce(logged.has_concurrency, false)       as has_concurrency,
        l.moe_backend,
        l.attention_backend,
        logged.linear_kernel
    from section_runs($run_ids::varchar[], $model) as a
    inner join launches as l on l.run_id = a.run_id
    left join logged on logged.run_id = a.run_id
    where a.status = 'ready'
    order by a.started_at, a.run_id
)

select * from final

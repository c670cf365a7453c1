-- The setup a model's story is told for (its header line): each ready launch of the model among a
-- Part's runs (section_runs), the reported attempt (is_current) first, with its engine, image,
-- layout, KV cache dtype and parallel sizes. Numbers (GPUs, maximum context) are printed as facts.
with final as (
    select
        a.run_id,
        a.spec,
        a.engine,
        a.engine_version,
        a.image,
        a.layout,
        l.kv_cache_dtype,
        a.gpu_count is not null                   as has_gpus,
        l.max_model_len is not null               as has_max_model_len,
        a.started_at
    from section_runs($run_ids::varchar[], $model) as a
    inner join launches as l on l.run_id = a.run_id
    where a.status = 'ready'
    order by a.is_current desc, a.started_at desc, a.run_id
)

select * exclude (started_at) from final

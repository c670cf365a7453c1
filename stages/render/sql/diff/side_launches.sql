-- The launches of one side of a comparison, with their needle-gate score. $run_ids: the side's runs.
with runs as (
    select * from runs where run_id in (select unnest($run_ids))
),

final as (
    select
        r.run_id, r.model, r.layout, r.ctx_label, r.image,
        l.max_model_len, l.kv_cache_dtype, l.status, l.ready_s, l.kv_tokens,
        g.score as gate_score
    from runs as r
    left join launches as l on l.run_id = r.run_id
    left join gates as g on g.run_id = r.run_id and g.gate = 'niah'
)

select * from final

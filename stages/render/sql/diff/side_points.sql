-- The benchmark points of one side of a comparison: the reported attempt (is_current) of each
-- selected run, with the settings that decide whether two points may be compared.
-- The regex brings bench_points' concurrency and, where the table has one, its repeat column.
-- $run_ids: the side's runs.
with runs as (
    select * from runs where run_id in (select unnest($run_ids))
),

final as (
    select
        p.run_id, r.model, r.layout, r.ctx_label, r.image,
        l.max_model_len, l.kv_cache_dtype,
        p.workload, columns('^(concurrency|repeat)$'), p.sent, p.completed, p.ttft_requests,
        p.ttft_median_s, p.ttft_p90_s, p.tpot_median_ms, p.output_tok_s,
        p.capacity_limited, p.provisional,
        'bench_points' as point_table
    from bench_points as p
    inner join runs as r on r.run_id = p.run_id
    left join launches as l on l.run_id = p.run_id
)

select * from final

-- The agents workloads of one side of a comparison, shaped like its benchmark points: the number
-- of sessions is the concurrency, and a workload is never capacity-limited (nor counts the
-- requests its TTFT rests on: ttft_requests is null, unknown).
-- $run_ids: the side's runs.
with runs as (
    select * from runs where run_id in (select unnest($run_ids))
),

final as (
    select
        a.run_id, r.model, r.layout, r.ctx_label, r.image,
        l.max_model_len, l.kv_cache_dtype,
        a.workload, a.sessions as concurrency, a.sent, a.completed, null::integer as ttft_requests,
        a.ttft_median_s, a.ttft_p90_s, a.tpot_median_ms, a.output_tok_s,
        false as capacity_limited, a.provisional,
        'agent_runs' as point_table
    from agent_runs as a
    inner join runs as r on r.run_id = a.run_id
    left join launches as l on l.run_id = a.run_id
)

select * from final

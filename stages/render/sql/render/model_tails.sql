-- The tails: the points of one model in a Part (section_points) computed from their requests,
-- for the median, p90 and p99 of time to first token and time per output token, and where the
-- latter come from (bench_points.tpot_from: latencies, itls, a tool's requests or its summary), and
-- the tool whose result file the point is.
with final as (
    select run_id, spec, workload, concurrency, coalesce(tpot_from, '-') as tpot_from, tool
    from section_points($run_ids::varchar[], $model)
    where ttft_requests > 0 or tpot_median_ms is not null
    order by started_at, run_id, prompt_tokens, workload, concurrency
)

select * from final

-- Prefill rate of a benchmark point: the median, over the requests its time to first token is
-- computed from (bench_requests.counts_for_ttft), of prompt tokens
-- over time to first token.
with kept as (
    select r.run_id, r.prefill_tok_s
    from bench_requests as r
    where r.run_id = $run_id and r.workload = $workload and r.concurrency = $concurrency
      and r.counts_for_ttft
),

final as (
    select
        median(prefill_tok_s) as value,
        'tok/s' as unit,
        list(distinct run_id) as run_id,
        'A median over the requests that the time to first token of the point is computed from (bench_requests).' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from kept
)

select * from final

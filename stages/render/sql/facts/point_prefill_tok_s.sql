-- Prefill rate of a benchmark point: derive's point_repeats.prefill_tok_s, the median, over the
-- requests of all its repeats that its time to first token is computed from
-- (bench_requests.counts_for_ttft), of prompt tokens over time to first token.
with final as (
    select
        any_value(prefill_tok_s) as value,
        'tok/s' as unit,
        list(distinct run_id) as run_id,
        'A median over the requests that the time to first token of the point is computed from (bench_requests).' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from point_repeats
    where run_id = $run_id and workload = $workload and concurrency = $concurrency
)

select * from final

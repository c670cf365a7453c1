-- One request at a time, every model of a Part: each one-user point of the reported attempts
-- (runs.is_current) among $run_ids with its prompt length and its prefill rate, the median over
-- its requests (every repeat) of prompt tokens over time to first token, over the requests that
-- count for the first token (bench_requests.counts_for_ttft), as the fact point_prefill_tok_s
-- does. For the chart of prefill rate against prompt length.
with points as (
    select
        p.run_id, p.point_id, p.workload, p.concurrency, p.prompt_tokens, p.provisional,
        p.cached, r.spec_label as series, r.model
    from shown_points() as p
    inner join runs as r on r.run_id = p.run_id
    where list_contains($run_ids::varchar[], p.run_id) and r.is_current and p.concurrency = 1
),

rates as (
    select q.run_id, q.workload, median(q.prefill_tok_s) as prefill_tok_s, count(*) as requests
    from bench_requests as q
    where list_contains($run_ids::varchar[], q.run_id) and q.concurrency = 1 and q.counts_for_ttft
      and q.prefill_tok_s is not null
    group by q.run_id, q.workload
),

final as (
    select p.*, rates.prefill_tok_s, rates.requests
    from points as p
    inner join rates on rates.run_id = p.run_id and rates.workload = p.workload
    order by p.series, p.prompt_tokens, p.workload
)

select * from final

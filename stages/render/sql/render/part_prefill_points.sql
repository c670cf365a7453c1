-- One request at a time, every model of a Part: each one-user point of the reported attempts
-- (runs.is_current) among $run_ids with its prompt length and its prefill rate (derive's
-- point_repeats.prefill_tok_s, over the requests of every repeat that count for the first token),
-- as the fact point_prefill_tok_s prints it. For the chart of prefill rate against prompt length.
with points as (
    select
        p.run_id, p.point_id, p.workload, p.concurrency, p.prompt_tokens, p.provisional,
        p.cached, r.spec_label as series, r.model
    from shown_points() as p
    inner join runs as r on r.run_id = p.run_id
    where list_contains($run_ids::varchar[], p.run_id) and r.is_current and p.concurrency = 1
),

rates as (
    select run_id, workload, prefill_tok_s, prefill_requests as requests
    from point_repeats
    where list_contains($run_ids::varchar[], run_id) and concurrency = 1 and prefill_requests > 0
),

final as (
    select p.*, rates.prefill_tok_s, rates.requests
    from points as p
    inner join rates on rates.run_id = p.run_id and rates.workload = p.workload
    order by p.series, p.prompt_tokens, p.workload
)

select * from final

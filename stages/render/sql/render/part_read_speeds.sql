-- For each one-user workload that several models of a Part ran (their reported attempts), the
-- model that read its prompt fastest and the one that read it slowest, by median time to first token
-- (of a repeated point, its first repeat: the figure the point's facts print).
with points as (
    select p.run_id, r.model, p.workload, p.concurrency, p.prompt_tokens, p.ttft_median_s
    from bench_points as p
    inner join runs as r on r.run_id = p.run_id
    where list_contains($run_ids::varchar[], p.run_id) and r.is_current
      and p.concurrency = 1 and p.ttft_median_s is not null
      and p.repeat = 1
),

ranked as (
    select
        *,
        row_number() over (partition by workload order by ttft_median_s, run_id)      as fast_rank,
        row_number() over (partition by workload order by ttft_median_s desc, run_id) as slow_rank,
        count(distinct model) over (partition by workload)                           as models
    from points
),

final as (
    select
        fast.workload,
        fast.concurrency,
        fast.run_id  as fast_run_id,
        fast.model   as fast_model,
        slow.run_id  as slow_run_id,
        slow.model   as slow_model,
        fast.prompt_tokens
    from ranked as fast
    inner join ranked as slow on slow.workload = fast.workload and slow.slow_rank = 1
    where fast.fast_rank = 1 and fast.models > 1 and fast.model <> slow.model
    order by fast.prompt_tokens desc, fast.workload
)

select * exclude (prompt_tokens) from final

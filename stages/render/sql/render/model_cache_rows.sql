-- Points of one model in a Part (section_points) whose prompt tokens the engine's own counters
-- say came partly from the prefix cache (bench_points.cache_hit_pct above zero): a time to first
-- token there measured less reading than the prompt's length says. any_left_out: whether any
-- request of the point is left out of its time to first token (bench_points.ttft_left_out:
-- failed or prefix_cache); cached_share only flags a request, which keeps its TTFT.
with final as (
    select
        p.run_id,
        p.spec,
        p.workload,
        p.concurrency,
        p.ttft_left_out > 0                             as any_left_out,
        p.started_at
    from section_points($run_ids::varchar[], $model) as p
    where p.cache_hit_pct > 0
    order by p.started_at, p.run_id, p.workload, p.concurrency
)

select * exclude (started_at) from final

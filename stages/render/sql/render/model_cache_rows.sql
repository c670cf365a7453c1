-- Points of one model in a Part (section_points) whose prompt tokens the engine's own counters
-- say came partly from the prefix cache (bench_points.cache_hit_pct above zero): a time to first
-- token there measured less reading than the prompt's length says. any_left_out: whether any
-- request of the point is left out of its time to first token (invalid_rows.excludes_ttft:
-- failed or prefix_cache), the requests the fact point_ttft_left_out counts; cached_share only
-- flags a request, which keeps its TTFT.
with left_out as (
    select distinct run_id, point_id
    from invalid_rows
    where excludes_ttft
),

final as (
    select
        p.run_id,
        p.spec,
        p.workload,
        p.concurrency,
        left_out.point_id is not null                   as any_left_out,
        p.started_at
    from section_points($run_ids::varchar[], $model) as p
    left join left_out on left_out.run_id = p.run_id and left_out.point_id = p.point_id
    where p.cache_hit_pct > 0
    order by p.started_at, p.run_id, p.workload, p.concurrency
)

select * exclude (started_at) from final

-- Points of one model in a Part (section_points) whose prompt tokens the engine's own counters
-- say came partly from the prefix cache (bench_points.cache_hit_pct above zero), with how many of
-- their requests the prefix-cache rule left out (invalid_rows, reasons prefix_cache and
-- cached_share): a time to first token there measured less reading than the prompt's length says.
with left_out as (
    select run_id, point_id, count(*) as left_out
    from invalid_rows
    where reason in ('prefix_cache', 'cached_share')
    group by run_id, point_id
),

final as (
    select
        p.run_id,
        p.spec,
        p.workload,
        p.concurrency,
        coalesce(left_out.left_out, 0) > 0              as any_left_out,
        p.started_at
    from section_points($run_ids::varchar[], $model) as p
    left join left_out on left_out.run_id = p.run_id and left_out.point_id = p.point_id
    where p.cache_hit_pct > 0
    order by p.started_at, p.run_id, p.workload, p.concurrency
)

select * exclude (started_at) from final

-- Requests of one model's points in a Part (section_points: each point's first repeat) that
-- invalid_rows lists: one row per point and reason, whose requests the fact point_invalid_count
-- counts (each once). left_out_of: the figures the reason keeps them out of, as invalid_rows
-- states it (excludes_ttft, excludes_tpot): 'first token and per token' (failed), 'first token'
-- (prefix_cache, text_not_output), 'per token' (burst_output, output_count), or 'neither: flagged
-- only' (short_output and cached_share, whose requests keep both).
with final as (
    select
        p.run_id, p.spec, p.point_id, p.workload, p.concurrency, i.reason,
        case
            when bool_or(i.excludes_ttft) and bool_or(i.excludes_tpot) then 'first token and per token'
            when bool_or(i.excludes_ttft) then 'first token'
            when bool_or(i.excludes_tpot) then 'per token'
            else 'neither: flagged only'
        end as left_out_of,
        p.started_at
    from section_points($run_ids::varchar[], $model) as p
    inner join invalid_rows as i on i.run_id = p.run_id and i.point_id = p.point_id
    group by p.run_id, p.spec, p.point_id, p.workload, p.concurrency, i.reason, p.started_at
    order by p.started_at, p.run_id, p.workload, p.concurrency, i.reason
)

select * exclude (started_at) from final

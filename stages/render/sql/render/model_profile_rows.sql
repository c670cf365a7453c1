-- Where the time went inside the profiled points of one model in a Part (section_points): one
-- row per point and kind of kernel (point_profile), the points in time order, the kinds in the
-- order the trace reader lists them.
with final as (
    select
        p.run_id,
        p.spec,
        p.point_id,
        p.workload,
        p.concurrency,
        pp.kind,
        pp.counted,
        p.started_at
    from section_points($run_ids::varchar[], $model) as p
    inner join point_profile as pp on pp.run_id = p.run_id and pp.point_id = p.point_id
    order by p.started_at, p.run_id, p.workload, p.concurrency,
             list_position(['collective', 'gemm', 'attention', 'moe', 'memcpy', 'other'], pp.kind)
)

select * exclude (started_at) from final

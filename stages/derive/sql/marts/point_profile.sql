-- Where a profiled point's time went: one row per point and kind of kernel (collective, GEMM,
-- attention, MoE, memcpy, other), summed over the point's trace files (one per worker), with
-- its share of the point's counted kernel time (the shares of a point sum to 100) and, for the
-- audit, the kind's longest-running kernels, each with the index of one of its events in its
-- trace (top_note). A CPU engine's trace counts its top-level operators (counted = cpu_ops).
with kinds as (
    select
        *,
        array_to_string(list_transform(
            from_json(top_json, '["JSON"]'),
            lambda t: printf('%s (%d, %.0f us; event %d)', left(json_extract_string(t, '$.name'), 120),
                             json_extract(t, '$.events')::integer, json_extract(t, '$.total_us')::double,
                             json_extract(t, '$.event_index')::integer)),
            '; ')                                                   as top_text
    from stg_profile_kinds
),

points as (
    select run_id, point_id, workload, concurrency from stg_bench_points
),

summed as (
    select
        run_id,
        point_id,
        kind,
        min(counted)                                                as counted,
        sum(events)::integer                                        as events,
        sum(total_us order by source_file)                          as total_us,
        count(*)::integer                                           as trace_files,
        min(source_file)                                            as source_file,
        string_agg(top_text, ' | ' order by source_file)            as top_kernels
    from kinds
    group by run_id, point_id, kind
),

point_totals as (
    select run_id, point_id, sum(total_us order by kind) as total_us
    from summed
    group by run_id, point_id
),

final as (
    select
        summed.run_id,
        summed.point_id,
        points.workload,
        points.concurrency,
        summed.kind,
        summed.counted,
        summed.events,
        summed.total_us,
        100.0 * summed.total_us / nullif(point_totals.total_us, 0)  as share_pct,
        summed.trace_files,
        summed.source_file,
        'The kernels of this kind in ' || summed.source_file
            || case when summed.trace_files > 1
                    then ' and ' || (summed.trace_files - 1) || ' more trace file(s)' else '' end
            || ', by time: ' || coalesce(summed.top_kernels, 'none') || '.' as top_note
    from summed
    left join points on points.run_id = summed.run_id and points.point_id = summed.point_id
    join point_totals on point_totals.run_id = summed.run_id and point_totals.point_id = summed.point_id
)

select * from final

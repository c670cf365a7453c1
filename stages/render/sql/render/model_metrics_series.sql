-- The /metrics series of the point whose requests the timeline draws (timeline_point): one row
-- per sample that read the engine, in seconds since the point's requests began (see
-- point_metrics_series). The rows of the metrics series chart.
with point as (
    select * from timeline_point($run_ids::varchar[], $model)
),

final as (
    select
        s.run_id,
        point.spec                                      as series,
        s.point_id,
        s.workload,
        s.concurrency,
        s.sample_idx,
        s.seconds,
        s.running,
        s.waiting,
        s.kv_usage_pct,
        s.gen_tok_s
    from point_metrics_series as s
    inner join point on point.run_id = s.run_id and point.point_id = s.point_id
    where s.error is null
    order by s.sample_idx
)

select * from final

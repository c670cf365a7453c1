-- The /metrics series of the point whose requests the timeline draws (timeline_point), when its
-- sampling read it often enough (point_metrics_summary.sampled_enough): one row per sample that
-- read the engine, in seconds since the point's requests began (see point_metrics_series), with
-- the interval each rate was measured over (rate_from_s to seconds), whether the sample was read
-- while the requests ran, and how long they ran (requests_s). The rows of the metrics series chart.
-- The point's columns are timeline_point's, its spec named series.
with final as (
    select
        point.* rename (spec as series),
        s.sample_idx,
        s.seconds,
        s.in_requests,
        s.running,
        s.waiting,
        s.kv_usage_pct,
        s.gen_tok_s,
        s.rate_from_s,
        m.requests_s
    from point_metrics_series as s
    inner join timeline_point($run_ids::varchar[], $model) as point
        on point.run_id = s.run_id and point.point_id = s.point_id
    inner join point_metrics_summary as m
        on m.run_id = s.run_id and m.point_id = s.point_id and m.source_file = s.source_file
    where s.error is null and m.sampled_enough
    order by s.sample_idx
)

select * from final

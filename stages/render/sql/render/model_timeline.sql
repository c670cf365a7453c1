-- The requests of one point (timeline_point) on the client's clock: when each was sent,
-- got its first token and its last, in seconds from the first send of the point. The rows of the
-- request timeline chart. The point's columns are timeline_point's, its spec named series.
with final as (
    select
        point.* rename (spec as series),
        r.request_idx,
        r.ok,
        r.start_time_s - min(r.start_time_s) over ()    as sent_s,
        r.start_time_s - min(r.start_time_s) over () + r.ttft_s    as first_token_s,
        r.start_time_s - min(r.start_time_s) over () + r.latency_s as last_token_s,
        r.output_tokens
    from bench_requests as r
    inner join timeline_point($run_ids::varchar[], $model) as point
        on point.run_id = r.run_id and point.point_id = r.point_id
    where r.start_time_s is not null
    order by r.start_time_s, r.request_idx
)

select * from final

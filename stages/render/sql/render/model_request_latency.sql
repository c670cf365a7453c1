-- The requests of the points of one model in a Part (section_points: each point's first repeat)
-- that its latency figures are computed from (bench_requests.counts_for_ttft: answered, and not
-- left out by an invalid_rows reason such as prefix_cache), labelled by spec for colour. The rows of the
-- latency CDF chart.
with points as (
    select run_id, point_id, spec, workload, concurrency, provisional
    from section_points($run_ids::varchar[], $model)
),

final as (
    select
        p.run_id,
        p.spec                                          as series,
        p.workload,
        p.concurrency,
        p.provisional,
        r.request_idx,
        r.ttft_s,
        r.tpot_ms
    from points as p
    inner join bench_requests as r on r.run_id = p.run_id and r.point_id = p.point_id
    where r.counts_for_ttft and r.ttft_s is not null
    order by p.spec, p.workload, p.concurrency, r.ttft_s
)

select * from final

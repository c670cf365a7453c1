-- Requests of a benchmark point (its first repeat) left out of its time-to-first-token figures
-- (median, p90, p99): those with a row of invalid_rows whose reason excludes them from TTFT
-- (invalid_rows.excludes_ttft: failed, or served from the prefix cache), each request once
-- however many reasons it has. With point_ttft_requests, the requests of a point whose figures
-- come from its requests: the two add up to them.
with point as (
    select run_id, point_id
    from bench_points
    where run_id = $run_id and workload = $workload and concurrency = $concurrency and repeat = 1
),

left_out as (
    select distinct i.request_idx
    from invalid_rows as i
    inner join point on point.run_id = i.run_id and point.point_id = i.point_id
    where i.excludes_ttft
),

final as (
    select
        (select count(*) from left_out) as value,
        'requests' as unit,
        $run_id as run_id,
        'Counted over the requests of the point with a row of invalid_rows that keeps them out of the time to first token (excludes_ttft: failed or prefix_cache), each once.' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
)

select * from final

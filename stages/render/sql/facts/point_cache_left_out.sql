-- Requests of a benchmark point (its first repeat) that the prefix-cache rule left out of its
-- time-to-first-token figures: answered faster than the profile's cache threshold (invalid_rows
-- reason prefix_cache), each once. Requests of a point whose engine counters show a large cached
-- share (reason cached_share) are flagged but keep their TTFT, and are not counted here; the
-- requests left out of the TTFT for any reason, failed ones included, are point_ttft_left_out.
with point as (
    select run_id, point_id
    from bench_points
    where run_id = $run_id and workload = $workload and concurrency = $concurrency and repeat = 1
),

left_out as (
    select distinct i.request_idx
    from invalid_rows as i
    inner join point on point.run_id = i.run_id and point.point_id = i.point_id
    where i.reason = 'prefix_cache'
),

final as (
    select
        (select count(*) from left_out) as value,
        'requests' as unit,
        $run_id as run_id,
        'Counted over the requests of the point with a row of invalid_rows of reason prefix_cache, each once.' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
)

select * from final

-- Requests of a benchmark point (its first repeat) that the prefix-cache rule left out of its
-- time-to-first-token statistics: served faster than the profile's cache threshold (prefix_cache)
-- or in a point whose engine counters show more cached prompt than rules.cached_share_max_pct
-- (cached_share), as invalid_rows lists them.
with point as (
    select run_id, point_id
    from bench_points
    where run_id = $run_id and workload = $workload and concurrency = $concurrency and repeat = 1
),

left_out as (
    select distinct i.request_idx
    from invalid_rows as i
    inner join point on point.run_id = i.run_id and point.point_id = i.point_id
    where i.reason in ('prefix_cache', 'cached_share')
),

final as (
    select
        (select count(*) from left_out) as value,
        'requests' as unit,
        $run_id as run_id,
        'Counted over the rows of invalid_rows for the point with reason prefix_cache or cached_share.' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
)

select * from final

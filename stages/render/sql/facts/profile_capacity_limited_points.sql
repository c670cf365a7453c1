-- Benchmark points on a profile with more users than the engine could hold (latest attempts).
with points as (
    select p.run_id, p.point_id
    from bench_points as p
    inner join runs as r on r.run_id = p.run_id
    where r.profile = $profile and r.is_current and p.capacity_limited
),

final as (
    select
        count(*) as value,
        'points' as unit,
        list(distinct run_id order by run_id) as run_id,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from points
)

select * from final

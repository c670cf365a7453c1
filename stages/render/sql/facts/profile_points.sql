-- Benchmark points measured on a profile (latest attempt of each spec).
with points as (
    select p.run_id, p.point_id
    from bench_points as p
    inner join runs as r on r.run_id = p.run_id
    where r.profile = $profile and r.is_current
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

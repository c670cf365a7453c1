-- Runs on a profile whose quality gate scored below the minimum.
with provisional as (
    select g.run_id
    from gates as g
    inner join runs as r on r.run_id = g.run_id
    where r.profile = $profile and g.provisional
),

final as (
    select
        count(distinct run_id) as value,
        'runs' as unit,
        list(distinct run_id order by run_id) as run_id,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from provisional
)

select * from final

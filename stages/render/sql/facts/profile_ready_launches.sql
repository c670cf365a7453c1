-- Launches on a profile that reached ready.
with ready as (
    select r.run_id
    from runs as r
    inner join launches as l on l.run_id = r.run_id
    where r.profile = $profile and l.status = 'ready'
),

final as (
    select
        count(*) as value,
        'launches' as unit,
        list(run_id order by run_id) as run_id,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from ready
)

select * from final

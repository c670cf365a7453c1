-- Events of one kind (run_events.event) recorded by the runs of a profile, every attempt.
-- When there is exactly one, its launch.out line is the fact's source.
with events as (
    select e.*
    from run_events as e
    inner join runs as r on r.run_id = e.run_id
    where r.profile = $profile and e.event = $event
),

final as (
    select
        count(*) as value,
        cast(null as varchar) as unit,
        list(distinct run_id order by run_id) as run_id,
        case when count(*) = 1 then min(source_file) end as source_file,
        case when count(*) = 1 then min(source_line) end as source_line
    from events
)

select * from final

-- Events of one kind (run_events.event) recorded by the runs of a profile, every attempt.
-- A count: no raw line holds it (the audit page lists the runs; run_events cites each event's line).
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
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from events
)

select * from final

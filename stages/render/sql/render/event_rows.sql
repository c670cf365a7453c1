-- What went wrong in the runs of a profile: the run_events rows, oldest run first, in launch.out
-- order, with the event in words.
with final as (
    select
        e.run_id,
        r.spec_label as spec,
        e.event,
        case e.event
            when 'point_failed' then 'point failed'
            when 'point_skipped' then 'point skipped'
            when 'profile_failed' then 'profile not kept'
            when 'run_interrupted' then 'run interrupted'
            when 'engine_died' then 'engine died'
            when 'run_failed' then 'run failed'
            when 'launch_failed' then 'launch failed'
            when 'engine_error' then 'engine error'
            else e.event
        end as event_label,
        e.point_id,
        coalesce(e.detail, '') as detail,
        e.source_file
    from run_events as e
    inner join runs as r on r.run_id = e.run_id
    where r.profile = $profile
    order by r.started_at, e.run_id, e.source_line
)

select * from final

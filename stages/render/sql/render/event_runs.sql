-- The runs of a profile that recorded something going wrong (run_events), oldest first, with
-- what happened to them and the attempt the articles report instead for the same attempt group
-- (spec, image and engine version).
with profile_runs as (
    select *
    from runs
    where profile = $profile
),

events as (
    select
        run_id,
        bool_or(event = 'run_interrupted') as interrupted,
        bool_or(event = 'engine_died')     as engine_died,
        bool_or(event = 'run_failed')      as run_failed,
        bool_or(event = 'launch_failed')   as launch_failed,
        bool_or(event = 'point_failed')    as points_failed,
        bool_or(event = 'point_skipped')   as points_skipped
    from run_events
    group by run_id
),

reported as (
    select attempt_group, run_id as reported_run_id, run_status = 'complete' as reported_complete
    from profile_runs
    where is_current
),

final as (
    select
        r.run_id,
        r.spec_label as spec,
        r.run_status,
        r.is_current,
        e.interrupted,
        e.engine_died,
        e.run_failed,
        e.launch_failed,
        e.points_failed,
        e.points_skipped,
        rep.reported_run_id,
        coalesce(rep.reported_complete, false) as reported_complete
    from profile_runs as r
    inner join events as e on e.run_id = r.run_id
    left join reported as rep on rep.attempt_group = r.attempt_group
    order by r.started_at, r.run_id
)

select * from final

-- One row per ramp workload of the reported attempt of each spec on a profile.
with current_runs as (
    select r.run_id, r.spec_label as spec, r.started_at
    from runs as r
    where r.profile = $profile and r.is_current
),

final as (
    select distinct
        t.run_id,
        current_runs.spec,
        current_runs.started_at,
        t.workload
    from ramp_turns as t
    inner join current_runs on current_runs.run_id = t.run_id
    order by current_runs.started_at, t.run_id, t.workload
)

select run_id, spec, workload from final

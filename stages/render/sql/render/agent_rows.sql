-- One row per agents workload of the reported attempt of each spec on a profile.
with current_runs as (
    select r.run_id, r.spec_label as spec, r.started_at
    from runs as r
    where r.profile = $profile and r.is_current
),

final as (
    select
        a.run_id,
        current_runs.spec,
        a.workload
    from agent_runs as a
    inner join current_runs on current_runs.run_id = a.run_id
    order by current_runs.started_at, a.run_id, a.workload
)

select * from final

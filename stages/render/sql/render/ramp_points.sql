-- Ramp turns of the reported attempt (runs.is_current) of each spec on a profile, labelled by spec
-- for colour: the rows of the ramp chart.
with current_runs as (
    select r.run_id, r.spec_label as spec
    from runs as r
    where r.profile = $profile and r.is_current
),

final as (
    select
        t.*,
        current_runs.spec as series
    from ramp_turns as t
    inner join current_runs on current_runs.run_id = t.run_id
    order by current_runs.spec, t.workload, t.turn
)

select * from final

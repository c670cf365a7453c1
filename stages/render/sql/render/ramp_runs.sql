-- One row per ramp workload of the reported attempt (runs.is_current) of each spec on a profile.
with final as (
    select distinct
        t.run_id,
        cur.spec,
        cur.started_at,
        t.workload
    from ramp_turns as t
    inner join current_runs($profile) as cur on cur.run_id = t.run_id
    order by cur.started_at, t.run_id, t.workload
)

select run_id, spec, workload from final

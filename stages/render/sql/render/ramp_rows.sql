-- One row per ramp turn of the reported attempt (runs.is_current) of each spec on a profile, for
-- the turn table.
with final as (
    select
        t.run_id,
        cur.spec,
        t.workload,
        t.turn
    from ramp_turns as t
    inner join current_runs($profile) as cur on cur.run_id = t.run_id
    order by cur.started_at, t.run_id, t.workload, t.turn
)

select * from final

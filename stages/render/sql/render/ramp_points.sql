-- Ramp turns of the reported attempt (runs.is_current) of each spec on a profile, labelled by spec
-- for colour: the rows of the ramp chart.
with final as (
    select
        t.*,
        cur.spec as series
    from ramp_turns as t
    inner join current_runs($profile) as cur on cur.run_id = t.run_id
    order by cur.spec, t.workload, t.turn
)

select * from final

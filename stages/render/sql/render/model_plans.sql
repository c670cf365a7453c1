-- Every launch of one model in a Part beside its plan (launch_plans): the verdict, the arithmetic
-- and what the plan rested on; the figures are facts (launch_plans' group of columns.yaml). The
-- block that prints it is left out where no launch could be planned (no model config here).
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
),

final as (
    select
        p.run_id,
        p.verdict,
        p.why,
        p.basis,
        p.planned_run_s is not null                 as timed,
        p.foreseen
    from attempts as a
    inner join launch_plans as p on p.run_id = a.run_id
    order by a.started_at, a.run_id
)

select * from final

-- One row per run (not a public table): provisional when any of its gates scored below
-- rules.gate_min_score (gates.provisional), or when it has no gate at all.
with gate_rows as (
    select runs.run_id, gates.provisional
    from runs
    left join gates on gates.run_id = runs.run_id
),

final as (
    select run_id, coalesce(bool_or(provisional), true) as provisional
    from gate_rows
    group by run_id
)

select * from final

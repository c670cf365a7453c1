-- One row per gated run (not a public table): provisional when any of its gates scored below
-- rules.gate_min_score (gates.provisional). A run without a gate has no row here; the marts that join
-- this read a missing row as provisional.
with gate_rows as (
    select * from gates
),

final as (
    select run_id, bool_or(provisional) as provisional
    from gate_rows
    group by run_id
)

select * from final

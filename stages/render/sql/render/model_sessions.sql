-- The multi-turn workloads (ramps and agent sessions) of one model's reported attempts.
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
    where is_current
),

sessions as (
    select distinct run_id, workload, 'ramp' as kind from ramp_turns
    union all
    select run_id, workload, 'agents' as kind from agent_runs
),

final as (
    select s.run_id, a.spec, s.workload, s.kind
    from sessions as s
    inner join attempts as a on a.run_id = s.run_id
    order by a.started_at, s.run_id, s.kind, s.workload
)

select * from final

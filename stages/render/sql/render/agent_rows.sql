-- One row per agents workload of the reported attempt (runs.is_current) of each spec on a profile.
with final as (
    select
        a.run_id,
        cur.spec,
        a.workload
    from agent_runs as a
    inner join current_runs($profile) as cur on cur.run_id = a.run_id
    order by cur.started_at, a.run_id, a.workload
)

select * from final

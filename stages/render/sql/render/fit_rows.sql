-- Sequences-that-fit rows for the latest ready attempt of each spec on a profile (runs.is_current,
-- its launch ready).
with latest as (
    select c.run_id, c.spec, c.started_at
    from current_runs($profile) as c
    inner join launches as l on l.run_id = c.run_id
    where l.status = 'ready'
),

final as (
    select
        s.run_id,
        latest.spec,
        s.workload,
        s.prompt_tokens,
        s.beyond_max_context
    from sequences_fit as s
    inner join latest on latest.run_id = s.run_id
    order by latest.started_at, s.run_id, s.prompt_tokens, s.workload
)

select * from final

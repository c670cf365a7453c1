-- Sequences that fit, for the reported ready attempt of each spec of one model in a Part.
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
    where is_current and status = 'ready'
),

final as (
    select
        s.run_id,
        a.spec,
        s.workload,
        s.prompt_tokens,
        s.beyond_max_context
    from sequences_fit as s
    inner join attempts as a on a.run_id = s.run_id
    order by a.started_at, s.run_id, s.prompt_tokens, s.workload
)

select * exclude (prompt_tokens) from final

-- Sequences that fit, for the reported ready attempt of each spec of one model in a Part.
with final as (
    select s.run_id, a.spec, s.workload, s.prompt_tokens, s.beyond_max_context, a.started_at
    from sequences_fit as s
    inner join section_runs($run_ids::varchar[], $model) as a on a.run_id = s.run_id
    where a.is_current and a.status = 'ready'
    order by a.started_at, s.run_id, s.prompt_tokens, s.workload
)

select * exclude (prompt_tokens, started_at) from final

-- Sequences-that-fit rows for the latest ready attempt of each spec on a profile.
with latest as (
    select r.run_id, r.spec_label as spec, r.started_at
    from runs as r
    inner join launches as l on l.run_id = r.run_id
    where r.profile = $profile and r.is_current and l.status = 'ready'
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

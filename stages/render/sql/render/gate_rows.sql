-- Needle gate result per gated run of a profile.
with final as (
    select
        r.run_id,
        r.spec_label as spec,
        g.gate,
        case when g.provisional then 'provisional' else 'passed' end as verdict
    from runs as r
    inner join gates as g on g.run_id = r.run_id
    where r.profile = $profile and g.gate = 'niah'
    order by r.started_at, r.run_id
)

select * from final

-- The needle gate of each gated launch of one model in a Part.
with final as (
    select
        a.run_id,
        a.spec,
        case when g.provisional then 'provisional' else 'passed' end as verdict,
        g.provisional
    from section_runs($run_ids::varchar[], $model) as a
    inner join gates as g on g.run_id = a.run_id and g.gate = 'niah'
    order by a.started_at, a.run_id
)

select * from final

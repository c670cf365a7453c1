-- The needle probes of one run, with the model's answers as text (a failed probe's reason instead).
with final as (
    select
        p.run_id,
        p.probe_idx,
        case when p.ok then 'found' when p.failure is not null then 'failed' else 'missed' end as outcome,
        coalesce(p.failure, p.answer, '') as answer
    from gate_probes as p
    where p.run_id = $run_id
    order by p.probe_idx
)

select * from final

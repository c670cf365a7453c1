-- The needle probes of one run, with the model's answers as text.
with final as (
    select
        p.run_id,
        p.probe_idx,
        case when p.ok then 'found' else 'missed' end as outcome,
        coalesce(p.answer, '') as answer
    from gate_probes as p
    where p.run_id = $run_id
    order by p.probe_idx
)

select * from final

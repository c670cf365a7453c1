-- Bench points of one model in a Part (section_points), labelled by spec for colour, with the two
-- capacity limits the charts draw: the sequence cap and the sequences that fit the KV pool at the
-- point's workload.
with final as (
    select p.* exclude (started_at), p.spec as series, l.seq_cap, fit.fit_by_kv
    from section_points($run_ids::varchar[], $model) as p
    left join launches as l on l.run_id = p.run_id
    left join sequences_fit as fit on fit.run_id = p.run_id and fit.workload = p.workload
    order by p.spec, p.workload, p.concurrency, p.run_id
)

select * from final

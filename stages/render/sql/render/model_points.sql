-- Bench points of the reported attempt of each spec of one model in a Part, labelled by spec
-- for colour, with the two capacity limits the charts draw: the sequence cap and the sequences
-- that fit the KV pool at the point's workload.
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
    where is_current
),

final as (
    select
        p.*,
        a.spec as series,
        l.seq_cap,
        fit.fit_by_kv,
        a.started_at
    from bench_points as p
    inner join attempts as a on a.run_id = p.run_id
    left join launches as l on l.run_id = p.run_id
    left join sequences_fit as fit on fit.run_id = p.run_id and fit.workload = p.workload
    order by a.spec, p.workload, p.concurrency
)

select * exclude (started_at) from final

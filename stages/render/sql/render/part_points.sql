-- Bench points of every model of a Part: the reported attempt (runs.is_current) of each spec
-- among $run_ids, as shown_points gives them, for the charts that set a Part's models on shared
-- axes. Without the capacity limits: each model has its own, and a model's section draws them.
with final as (
    select p.*, r.spec_label as series
    from shown_points() as p
    inner join runs as r on r.run_id = p.run_id
    where list_contains($run_ids::varchar[], p.run_id) and r.is_current and p.concurrency is not null
    order by r.spec_label, p.workload, p.concurrency, p.run_id
)

select * from final

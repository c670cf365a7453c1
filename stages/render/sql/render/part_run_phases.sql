-- Where each run of a Part spent its time: every run among $run_ids with a run_timeline, one row
-- per kind of phase (run_phases), in the order the run first met it, with the run's setup label
-- and its start. For the chart of where the time went (a stacked bar per run).
with final as (
    select
        p.run_id,
        r.spec_label                                            as series,
        r.started_at,
        p.phase,
        p.first_order,
        p.seconds,
        p.share_pct,
        p.run_s,
        p.gpu_count,
        p.gpu_hours,
        p.estimated
    from run_phases as p
    inner join runs as r on r.run_id = p.run_id
    where list_contains($run_ids::varchar[], p.run_id)
    order by r.started_at, p.run_id, p.first_order
)

select * from final

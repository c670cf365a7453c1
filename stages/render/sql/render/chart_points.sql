-- Bench points of the reported attempt (runs.is_current) of each spec on a profile, labelled by spec for colour.
-- One row per point (shown_points: a repeated point is drawn by the median of its repeats).
with final as (
    select
        p.*,
        latest.spec as series
    from shown_points() as p
    inner join current_runs($profile) as latest on latest.run_id = p.run_id
    where p.concurrency is not null
    order by latest.spec, p.workload, p.concurrency
)

select * from final

-- Within the latency targets: per reported launch of one model in a Part (section_runs, the
-- current attempt of each spec) and workload with service level objectives, the most users that
-- met them (slo_concurrency), with how that figure was found.
with final as (
    select s.run_id, a.spec, s.workload, s.bracket,
           s.failed_concurrency is not null as has_failed
    from slo_concurrency as s
    inner join section_runs($run_ids::varchar[], $model) as a on a.run_id = s.run_id
    where a.is_current
    order by a.started_at, s.run_id, s.workload
)

select * from final

-- Within the latency targets, point by point: the points of one model in a Part (section_points)
-- whose workload has service level objectives and whose requests were judged (point_slo), with
-- whether each met them.
with final as (
    select p.run_id, p.spec, p.workload, p.concurrency,
           case when s.meets_slo then 'met' else 'missed' end as verdict
    from section_points($run_ids::varchar[], $model) as p
    inner join point_slo as s on s.run_id = p.run_id and s.point_id = p.point_id
    where s.slo_judged_requests > 0
    order by p.started_at, p.run_id, p.prompt_tokens, p.workload, p.concurrency
)

select * from final

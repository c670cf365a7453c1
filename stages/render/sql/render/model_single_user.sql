-- One request at a time: the one-user points of the reported attempts of one model in a Part,
-- from the shortest prompt to the longest.
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
    where is_current
),

final as (
    select
        p.run_id,
        a.spec,
        p.point_id,
        p.workload,
        p.concurrency,
        p.prompt_tokens,
        p.ttft_median_s is null                  as no_ttft
    from bench_points as p
    inner join attempts as a on a.run_id = p.run_id
    where p.concurrency = 1
    order by a.started_at, p.run_id, p.prompt_tokens, p.output_tokens, p.workload
)

select * exclude (prompt_tokens) from final

-- For one model of a Part whose setup ran under two images (or engine versions), each one-user
-- workload both ran: the earlier image's run (base) and the later one's (head), for the story's
-- one-line comparison. The reported attempt of each image; the earliest pair when there are more.
with runs as (
    select run_id, image, started_at
    from section_runs($run_ids::varchar[], $model)
    where is_current and status = 'ready'
),

pair as (
    select base.run_id as base_run_id, head.run_id as head_run_id
    from runs as base
    inner join runs as head on head.started_at > base.started_at and head.image <> base.image
    order by base.started_at, head.started_at
    limit 1
),

final as (
    select pair.base_run_id, pair.head_run_id, b.workload, b.prompt_tokens
    from pair
    inner join bench_points as b on b.run_id = pair.base_run_id and b.concurrency = 1 and b.repeat = 1
    inner join bench_points as h
        on h.run_id = pair.head_run_id and h.workload = b.workload and h.concurrency = 1 and h.repeat = 1
    where b.ttft_median_s is not null and h.ttft_median_s is not null
    order by b.prompt_tokens desc, b.workload
)

select * from final

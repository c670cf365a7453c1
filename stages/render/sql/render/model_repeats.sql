-- Repeated points of one model in a Part (section_points): those that ran more than once, with
-- the spread of their repeats (point_repeats).
with final as (
    select run_id, spec, workload, concurrency, repeats
    from section_points($run_ids::varchar[], $model)
    where repeats > 1
    order by started_at, run_id, prompt_tokens, workload, concurrency
)

select * from final

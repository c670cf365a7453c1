-- One request at a time: the one-user points of one model in a Part (section_points), from the
-- shortest prompt to the longest.
with final as (
    select run_id, spec, point_id, workload, concurrency, ttft_median_s is null as no_ttft, tool
    from section_points($run_ids::varchar[], $model)
    where concurrency = 1
    order by started_at, run_id, prompt_tokens, output_tokens, workload
)

select * from final

-- Change of one metric of an agents workload from the base run to the head run of a comparison,
-- in percent of the base value (as `campaign diff` computes it). A computed figure: no raw line
-- holds it (the base and head values cite theirs); both runs are listed.
with base as (
    select *
    from agent_runs
    where run_id = $base_run_id and workload = $workload
),

head as (
    select *
    from agent_runs
    where run_id = $head_run_id and workload = $workload
),

paired as (
    select
        case $metric
            when 'ttft_median_s' then base.ttft_median_s
            when 'ttft_p90_s' then base.ttft_p90_s
            when 'tpot_median_ms' then base.tpot_median_ms
            when 'output_tok_s' then base.output_tok_s
            when 'completed_pct' then 100.0 * base.completed / nullif(base.sent, 0)
        end as base_value,
        case $metric
            when 'ttft_median_s' then head.ttft_median_s
            when 'ttft_p90_s' then head.ttft_p90_s
            when 'tpot_median_ms' then head.tpot_median_ms
            when 'output_tok_s' then head.output_tok_s
            when 'completed_pct' then 100.0 * head.completed / nullif(head.sent, 0)
        end as head_value,
        base.run_id as base_run_id,
        head.run_id as head_run_id,
        head.source_file,
        head.source_line
    from base
    cross join head
),

final as (
    select
        100.0 * (head_value - base_value) / nullif(abs(base_value), 0) as value,
        printf('%+.1f', 100.0 * (head_value - base_value) / nullif(abs(base_value), 0)) as display,
        '%' as unit,
        [base_run_id, head_run_id] as run_id,
        'Computed from the base and head values, whose facts cite their own raw lines.' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from paired
)

select * from final

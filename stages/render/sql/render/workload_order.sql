-- Every benchmark workload of the campaign in prompt-length order, then output length, then name:
-- the order of a chart's workload panels. Lengths as the benchmark points give them (the prompt
-- and output tokens params.yaml asks for, for the project's own runs; as measured, for a workload
-- of imported runs that params does not name). A chart's rows of a workload not here (a
-- multi-turn workload) come after these.
with measured as (
    select workload, median(prompt_tokens) as prompt_tokens, median(output_tokens) as output_tokens
    from bench_points
    group by workload
),

final as (
    select
        workload,
        row_number() over (order by prompt_tokens nulls last, output_tokens nulls last, workload) - 1
            as workload_rank
    from measured
)

select * from final
order by workload_rank

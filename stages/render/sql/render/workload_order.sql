-- Every workload of the campaign in prompt-length order, then output length, then name: the
-- order of a chart's workload panels. Lengths as params.yaml declares them (param_workloads; a
-- name declared by several profiles at its shortest), else as the benchmark points measured them
-- (a workload of imported runs that params does not name); multi-turn workloads, which have no
-- fixed prompt, last.
with declared as (
    select workload, min(prompt_tokens) as prompt_tokens, min(output_tokens) as output_tokens
    from param_workloads
    group by workload
),

measured as (
    select workload, median(prompt_tokens) as prompt_tokens, median(output_tokens) as output_tokens
    from bench_points
    group by workload
),

named as (
    select workload from declared
    union
    select workload from measured
),

final as (
    select
        n.workload,
        row_number() over (
            order by coalesce(d.prompt_tokens, m.prompt_tokens) nulls last,
                     coalesce(d.output_tokens, m.output_tokens) nulls last,
                     n.workload) - 1 as workload_rank
    from named as n
    left join declared as d on d.workload = n.workload
    left join measured as m on m.workload = n.workload
)

select * from final
order by workload_rank

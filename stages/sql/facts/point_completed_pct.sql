-- Share of the point's requests that completed, in percent of those sent.
with source as (
    select *
    from bench_points
    where run_id = $run_id and workload = $workload and concurrency = $concurrency
),

final as (
    select
        100.0 * completed / nullif(sent, 0) as value,
        '%' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

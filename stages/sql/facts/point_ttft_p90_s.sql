-- 90th percentile time to first token over the point's valid requests.
with source as (
    select *
    from bench_points
    where run_id = $run_id and workload = $workload and concurrency = $concurrency
),

final as (
    select
        ttft_p90_s as value,
        's' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

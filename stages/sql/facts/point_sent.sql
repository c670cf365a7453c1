-- Requests sent at a benchmark point.
with source as (
    select *
    from bench_points
    where run_id = $run_id and workload = $workload and concurrency = $concurrency
),

final as (
    select
        sent as value,
        'requests' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

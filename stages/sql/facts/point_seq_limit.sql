-- The lower of the sequence cap and the sequences that fit at this workload.
with source as (
    select *
    from bench_points
    where run_id = $run_id and workload = $workload and concurrency = $concurrency
),

final as (
    select
        seq_limit as value,
        'sequences' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

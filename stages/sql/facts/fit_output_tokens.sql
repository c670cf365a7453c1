-- Output tokens per request of the workload.
with source as (
    select *
    from sequences_fit
    where run_id = $run_id and workload = $workload
),

final as (
    select
        output_tokens as value,
        'tokens' as unit,
        run_id as run_id,
        kv_source_file as source_file,
        kv_source_line as source_line
    from source
)

select * from final

-- Memory the engine gave the KV cache, GiB.
with source as (
    select *
    from launches
    where run_id = $run_id
),

final as (
    select
        kv_cache_gib as value,
        'GiB' as unit,
        run_id as run_id,
        kv_source_file as source_file,
        kv_source_line as source_line
    from source
)

select * from final

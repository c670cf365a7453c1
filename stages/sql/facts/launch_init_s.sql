-- Engine init time (profile, KV cache, warm-up) in seconds.
with source as (
    select *
    from launches
    where run_id = $run_id
),

final as (
    select
        init_s as value,
        's' as unit,
        run_id as run_id,
        kv_source_file as source_file,
        kv_source_line as source_line
    from source
)

select * from final

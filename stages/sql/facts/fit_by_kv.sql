-- floor(KV pool / context tokens) x engines.
with source as (
    select *
    from sequences_fit
    where run_id = $run_id and workload = $workload
),

final as (
    select
        fit_by_kv as value,
        'sequences' as unit,
        run_id as run_id,
        kv_source_file as source_file,
        kv_source_line as source_line
    from source
)

select * from final

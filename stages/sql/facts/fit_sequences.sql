-- Sequences that fit: the lower of fit_by_kv and the cap; null beyond max context.
with source as (
    select *
    from sequences_fit
    where run_id = $run_id and workload = $workload
),

final as (
    select
        sequences as value,
        'sequences' as unit,
        run_id as run_id,
        kv_source_file as source_file,
        kv_source_line as source_line
    from source
)

select * from final

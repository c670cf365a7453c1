-- Needle probes sent.
with source as (
    select *
    from gates
    where run_id = $run_id and gate = 'niah'
),

final as (
    select
        probes as value,
        'probes' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

-- Engine version the run reported.
with source as (
    select *
    from runs
    where run_id = $run_id
),

final as (
    select
        engine_version as value,
        cast(null as varchar) as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

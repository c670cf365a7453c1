-- What ingest could not read, as it recorded it.
with errors as (
    select * from stg_ingest_errors
),

final as (
    select
        run_id,
        source_file,
        source_line,
        reason
    from errors
)

select * from final

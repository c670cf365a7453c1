-- Files or lines ingest could not read.
with source as (
    select * from raw.ingest_errors
),

final as (
    select
        run_id::varchar               as run_id,
        source_file::varchar          as source_file,
        source_line::integer          as source_line,
        reason::varchar               as reason
    from source
)

select * from final

-- Files of sealed run folders that no longer match their seal.
with source as (
    select * from raw.raw_tampered
),

final as (
    select
        run_id::varchar               as run_id,
        file::varchar                 as file,
        reason::varchar               as reason,
        rows_kept::boolean            as rows_kept,
        detected_at::timestamptz      as detected_at,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

-- One row per ingested run folder.
with source as (
    select * from raw.raw_folders
),

final as (
    select
        run_id::varchar               as run_id,
        folder::varchar               as folder,
        fingerprint::varchar          as fingerprint,
        files::integer                as files,
        bytes::bigint                 as bytes,
        ingested_at::timestamptz      as ingested_at
    from source
)

select * from final

-- The seal of each run folder as ingest first found it.
with source as (
    select * from raw.raw_seals
),

final as (
    select
        run_id::varchar               as run_id,
        manifest_sha256::varchar      as manifest_sha256,
        sealed_by::varchar            as sealed_by,
        sealed_at::timestamptz        as sealed_at,
        first_ingested_at::timestamptz as first_ingested_at
    from source
)

select * from final

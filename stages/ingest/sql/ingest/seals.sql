-- The sha256 of each run folder's MANIFEST.sha256 as ingest first found it.
with final as (
    select run_id, manifest_sha256
    from raw_seals
)

select * from final

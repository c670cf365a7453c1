-- The run folders already in the warehouse and the fingerprint they were read with.
with final as (
    select run_id, fingerprint
    from raw_folders
)

select * from final

-- What was already recorded as changed in one run folder, and when it was first seen.
with final as (
    select file, reason, detected_at
    from raw_tampered
    where run_id = $run_id
)

select * from final

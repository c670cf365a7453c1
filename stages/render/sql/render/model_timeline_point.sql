-- The point whose requests the request timeline chart draws, for one model in a Part
-- (timeline_point: the most requests with their send times recorded).
with final as (
    select * from timeline_point($run_ids::varchar[], $model)
)

select * from final

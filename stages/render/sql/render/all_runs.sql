-- Every run of the campaign, oldest first, with its profile: render names those no Part covers.
with final as (
    select run_id, profile
    from runs
    order by started_at, run_id
)

select * from final

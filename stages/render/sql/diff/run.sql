-- Whether a side of a comparison names one run by its id: the runs (any attempt) with that id.
-- $run_id: the side's token.
with final as (
    select count(*) as runs
    from runs
    where run_id = $run_id::varchar
)

select * from final

-- One row per launch on a profile: the launches table's keys and text columns.
with final as (
    select
        r.run_id,
        r.spec_label as spec,
        l.status,
        coalesce(l.error_type, '') as error_type
    from runs as r
    inner join launches as l on l.run_id = r.run_id
    where r.profile = $profile
    order by r.started_at, r.run_id
)

select * from final

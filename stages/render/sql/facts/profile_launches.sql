-- Engine launches (all attempts) on a profile.
with profile_runs as (
    select r.run_id
    from runs as r
    where r.profile = $profile
),

final as (
    select
        count(*) as value,
        'launches' as unit,
        list(run_id order by run_id) as run_id,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from profile_runs
)

select * from final

-- Whose params.yaml settings each run is judged by: params_profile is the run's own profile
-- (meta.json) when params.yaml has it, else null, which names the active profile's rows of
-- param_rules and param_workloads. Join those with `profile is not distinct from params_profile`
-- after a left join to this model: a run without meta.json has no row here and also gets them.
with run_profiles as (
    select run_id, min(profile) as profile from stg_runs group by run_id
),

profiles as (
    select profile from param_rules where profile is not null
),

final as (
    select
        run_profiles.run_id,
        profiles.profile                                as params_profile
    from run_profiles
    left join profiles
        on profiles.profile = run_profiles.profile
)

select * from final

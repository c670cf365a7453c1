-- What changed from one launch of a model to the next on the same profile: each engine flag
-- added, removed or given another value in the command, and a changed image. A model's first
-- launch has no row. Each row cites the cmd.sh line of the later launch (its meta.json for the
-- image, or when no command of it was read).
with run_rows as (
    select run_id, profile, model, image, started_at, source_file, source_line
    from stg_runs
),

ordered as (
    select
        run_id,
        lag(run_id) over (partition by profile, model order by started_at, run_id) as previous_run_id,
        image,
        lag(image) over (partition by profile, model order by started_at, run_id) as previous_image,
        source_file,
        source_line
    from run_rows
),

flags as (
    select run_id, flag, flag_value, source_file, source_line
    from stg_command_flags
    qualify row_number() over (partition by run_id, flag order by flag_position desc) = 1
),

commands as (
    select run_id, source_file, source_line
    from stg_commands
    qualify row_number() over (partition by run_id order by source_file, source_line) = 1
),

pair_flags as (
    select distinct ordered.run_id, ordered.previous_run_id, flags.flag
    from ordered
    inner join flags on flags.run_id in (ordered.run_id, ordered.previous_run_id)
    where ordered.previous_run_id is not null
),

pairs as (
    select
        pair_flags.run_id,
        pair_flags.previous_run_id,
        case
            when before.flag is null then 'flag added'
            when now.flag is null then 'flag removed'
            else 'flag changed'
        end                                             as change,
        pair_flags.flag                                 as name,
        before.flag_value                               as old_value,
        now.flag_value                                  as new_value,
        coalesce(now.source_file, commands.source_file, later.source_file) as source_file,
        coalesce(now.source_line, commands.source_line, later.source_line) as source_line
    from pair_flags
    left join flags as now on now.run_id = pair_flags.run_id and now.flag = pair_flags.flag
    left join flags as before on before.run_id = pair_flags.previous_run_id and before.flag = pair_flags.flag
    left join commands on commands.run_id = pair_flags.run_id
    left join ordered as later on later.run_id = pair_flags.run_id
),

flag_changes as (
    select * from pairs
    where change <> 'flag changed' or old_value is distinct from new_value
),

image_changes as (
    select
        run_id, previous_run_id, 'image changed' as change, 'image' as name,
        previous_image as old_value, image as new_value, source_file, source_line
    from ordered
    where previous_run_id is not null and image is distinct from previous_image
),

final as (
    select run_id, previous_run_id, change, name, old_value, new_value, source_file, source_line
    from (select * from image_changes union all select * from flag_changes)
    order by run_id, change, name
)

select * from final

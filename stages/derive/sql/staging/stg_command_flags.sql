-- Every flag of each engine command.
with source as (
    select * from raw.raw_command_flags
),

final as (
    select
        run_id::varchar               as run_id,
        position::integer             as flag_position,
        flag::varchar                 as flag,
        value::varchar                as flag_value,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

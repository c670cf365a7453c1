-- launch.out key=value lines.
with source as (
    select * from raw.raw_launch_out
),

final as (
    select
        run_id::varchar               as run_id,
        lower(trim(key))::varchar     as launch_key,
        trim(value)::varchar          as launch_value,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

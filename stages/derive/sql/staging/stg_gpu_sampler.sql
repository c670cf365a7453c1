-- The `# key=value` lines of each GPU sampler file (gpu/<point_id>.csv): the point, its GPU set,
-- the interval, the clock and the command before the samples; the point's window and how the
-- loop ended after them.
with source as (
    select * from raw.raw_gpu_sampler
),

final as (
    select
        run_id::varchar               as run_id,
        point_id::varchar             as point_id,
        key::varchar                  as key,
        value::varchar                as value,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

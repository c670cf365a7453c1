-- The `# key=value` lines of the sampler files written around a benchmark point, one row a line;
-- sampler says whose file it is: 'gpu' (gpu/<point_id>.csv) or 'metrics'
-- (bench/<point_id>.metrics-series.txt). raw.sql lists the keys of each.
with source as (
    select * from raw.raw_sampler_settings
),

final as (
    select
        run_id::varchar               as run_id,
        point_id::varchar             as point_id,
        sampler::varchar              as sampler,
        key::varchar                  as key,
        value::varchar                as value,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

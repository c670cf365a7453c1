-- The `# key=value` lines of each /metrics series file: point, url, interval_ms and clock before
-- the samples; requests_start, requests_end (epoch seconds), samples and sampler_exit after them.
with source as (
    select * from raw.raw_metrics_series_settings
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

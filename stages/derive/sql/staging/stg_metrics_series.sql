-- One row per line of a /metrics series file (bench/<point_id>.metrics-series.txt): each sample's
-- `@` line (metric_name null; error when the scrape failed) and each exposition line of it.
with source as (
    select * from raw.raw_metrics_series
),

final as (
    select
        run_id::varchar               as run_id,
        point_id::varchar             as point_id,
        sample_idx::integer           as sample_idx,
        t_s::double                   as t_s,
        name::varchar                 as metric_name,
        labels::varchar               as metric_labels,
        value::double                 as metric_value,
        error::varchar                as error,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

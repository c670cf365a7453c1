-- /metrics samples scraped before and after each benchmark point.
with source as (
    select * from raw.raw_metrics
),

final as (
    select
        run_id::varchar               as run_id,
        point_id::varchar             as point_id,
        lower(phase)::varchar         as phase,
        name::varchar                 as metric_name,
        labels::varchar               as metric_labels,
        value::double                 as metric_value,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

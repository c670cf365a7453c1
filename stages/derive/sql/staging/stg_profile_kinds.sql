-- The engine profiler's trace of each profiled point, its kernel time by kind (one row per kind
-- and trace file).
with source as (
    select * from raw.raw_profile_kinds
),

final as (
    select
        run_id::varchar         as run_id,
        point_id::varchar       as point_id,
        counted::varchar        as counted,
        kind::varchar           as kind,
        events::integer         as events,
        total_us::double        as total_us,
        share_pct::double       as share_pct,
        window_us::double       as window_us,
        top_json::varchar       as top_json,
        source_file::varchar    as source_file,
        source_line::integer    as source_line
    from source
)

select * from final

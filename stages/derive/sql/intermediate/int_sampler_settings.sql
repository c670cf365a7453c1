-- One row per sampler file of a point (stg_sampler_settings: sampler 'gpu' for gpu/<point_id>.csv,
-- 'metrics' for bench/<point_id>.metrics-series.txt): the `# key=value` settings its readers use,
-- as text, with the line of each window key. The first line of a key counts; a key the file
-- lacks is null.
with settings as (
    select * from stg_sampler_settings
),

final as (
    select
        sampler,
        run_id,
        point_id,
        source_file,
        arg_min(value, source_line) filter (where key = 'gpus')           as gpus,
        arg_min(value, source_line) filter (where key = 'interval_ms')    as interval_ms,
        arg_min(value, source_line) filter (where key = 'window_start')   as window_start,
        min(source_line) filter (where key = 'window_start')              as window_start_line,
        arg_min(value, source_line) filter (where key = 'window_end')     as window_end,
        min(source_line) filter (where key = 'window_end')                as window_end_line,
        arg_min(value, source_line) filter (where key = 'requests_start') as requests_start,
        min(source_line) filter (where key = 'requests_start')            as requests_start_line,
        arg_min(value, source_line) filter (where key = 'requests_end')   as requests_end,
        min(source_line) filter (where key = 'requests_end')              as requests_end_line,
        arg_min(value, source_line) filter (where key = 'sampler_exit')   as sampler_exit,
        arg_min(value, source_line) filter (where key = 'sampler_error')  as sampler_error
    from settings
    group by sampler, run_id, point_id, source_file
)

select * from final

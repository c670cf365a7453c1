-- One row per GPU sampler file (gpu/<point_id>.csv): its GPU set (`# gpus=`), the point's window
-- (`# window_start=`, `# window_end=`, ISO UTC, with their lines and as epoch seconds) and the
-- sampler's error, if it wrote one. The first line of a key counts.
with settings as (
    select
        run_id,
        point_id,
        source_file,
        arg_min(value, source_line) filter (where key = 'gpus')          as gpus,
        arg_min(value, source_line) filter (where key = 'window_start')  as window_start_text,
        min(source_line) filter (where key = 'window_start')             as window_start_line,
        arg_min(value, source_line) filter (where key = 'window_end')    as window_end_text,
        min(source_line) filter (where key = 'window_end')               as window_end_line,
        arg_min(value, source_line) filter (where key = 'sampler_error') as sampler_error
    from stg_gpu_sampler
    group by run_id, point_id, source_file
),

final as (
    select
        run_id,
        point_id,
        source_file,
        gpus,
        try_cast(window_start_text as timestamptz)                       as window_start,
        try_cast(window_end_text as timestamptz)                         as window_end,
        epoch_us(try_cast(window_start_text as timestamptz)) / 1e6       as window_start_epoch_s,
        epoch_us(try_cast(window_end_text as timestamptz)) / 1e6         as window_end_epoch_s,
        window_start_line,
        window_end_line,
        sampler_error
    from settings
)

select * from final

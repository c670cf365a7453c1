-- One row per GPU sampler file (gpu/<point_id>.csv): its GPU set (`# gpus=`), the sampler's own
-- window (`# window_start=`, `# window_end=`: the benchmark client's whole run, its set-up
-- included) and the window the point's energy is counted over, with the lines each comes from.
-- The first line of a key counts (int_sampler_settings).
-- window_from: where the energy window comes from:
--   'requests'         the file's `# requests_start=` and `# requests_end=` lines: the client timed
--                      its requests, from the first of the point's requests sent to the last answer;
--   'result duration'  a file written before those lines were: the benchmark's own `duration`
--                      (its result file) before the sampler window's end, the client's set-up left
--                      out but its last second of bookkeeping kept in;
--   'sampler'          neither (a multi-turn workload of such a file): the sampler's own window.
-- window_start_epoch_s / window_end_epoch_s: that window, in epoch seconds; window_start_line /
--   window_end_line: the lines it was read from (the result file's line for the duration:
--   window_source_file).
with settings as (
    select
        run_id,
        point_id,
        source_file,
        gpus,
        window_start                                                      as sampler_start_text,
        window_start_line                                                 as sampler_start_line,
        window_end                                                        as sampler_end_text,
        window_end_line                                                   as sampler_end_line,
        requests_start                                                    as requests_start_text,
        requests_start_line,
        requests_end                                                      as requests_end_text,
        requests_end_line,
        sampler_error
    from int_sampler_settings
    where sampler = 'gpu'
),

times as (
    select
        settings.*,
        epoch_us(try_cast(sampler_start_text as timestamptz)) / 1e6       as sampler_start_epoch_s,
        epoch_us(try_cast(sampler_end_text as timestamptz)) / 1e6         as sampler_end_epoch_s,
        epoch_us(try_cast(requests_start_text as timestamptz)) / 1e6      as requests_start_epoch_s,
        epoch_us(try_cast(requests_end_text as timestamptz)) / 1e6        as requests_end_epoch_s,
        points.duration_s,
        points.source_file                                                as result_file,
        points.source_line                                                as result_line
    from settings
    left join stg_bench_points as points
        on points.run_id = settings.run_id and points.point_id = settings.point_id
),

chosen as (
    select
        *,
        case
            when requests_start_epoch_s is not null and requests_end_epoch_s >= requests_start_epoch_s
                then 'requests'
            when duration_s > 0 and sampler_end_epoch_s is not null then 'result duration'
            else 'sampler'
        end                                                               as window_from
    from times
),

windows as (
    select
        *,
        case window_from
            when 'requests' then requests_start_epoch_s
            when 'result duration' then sampler_end_epoch_s - duration_s
            else sampler_start_epoch_s
        end                                                               as window_start_epoch_s,
        case window_from
            when 'requests' then requests_end_epoch_s
            else sampler_end_epoch_s
        end                                                               as window_end_epoch_s
    from chosen
),

final as (
    select
        run_id,
        point_id,
        source_file,
        gpus,
        window_from,
        to_timestamp(window_start_epoch_s)                                as window_start,
        to_timestamp(window_end_epoch_s)                                  as window_end,
        window_start_epoch_s,
        window_end_epoch_s,
        case window_from
            when 'requests' then requests_start_line
            when 'result duration' then result_line
            else sampler_start_line
        end                                                               as window_start_line,
        case window_from
            when 'requests' then requests_end_line
            else sampler_end_line
        end                                                               as window_end_line,
        case when window_from = 'result duration' then result_file end    as window_source_file,
        sampler_start_epoch_s,
        sampler_end_epoch_s,
        sampler_start_line,
        sampler_end_line,
        duration_s                                                        as bench_duration_s,
        sampler_error
    from windows
)

select * from final

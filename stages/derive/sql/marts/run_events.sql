-- What happened to each run, one row per launch.out line that records something going wrong:
--   point_error=<point_id> <ExceptionType>: <message>  -> point_failed (the point in flight)
--   point_skipped=<point_id> <why>                     -> point_skipped
--   profile_error=<point_id> <why>                     -> profile_failed (the point ran, its
--                                                         profiler trace is missing or not kept)
--   run_status=interrupted | engine_died | failed      -> run_interrupted | engine_died | run_failed
--   error=<message> (or status=failed without one)     -> launch_failed
-- run_status=failed after a launch that failed is the same event as launch_failed and is not
-- repeated; after a ready launch it means the run stopped before its benchmarks (run_failed).
-- Run-level statuses use the run's last run_status line, as runs.run_status does.
-- From the engine logs, one engine_error row per error a log records in a log that also shows
-- the engine ready: an error after the ready line (the engine died while serving), or one before
-- it (a launch that never became ready, restarted in the same log). These are not launch failures;
-- source_file and source_line are the log's own.
with launch_out as (
    select * from stg_launch_out
),

points_written as (
    select run_id, launch_value as points
    from launch_out
    where launch_key = 'points'
    qualify row_number() over (partition by run_id order by source_line desc) = 1
),

point_lines as (
    select
        run_id,
        case launch_key when 'point_error' then 'point_failed'
                        when 'profile_error' then 'profile_failed'
                        else 'point_skipped' end                                     as event,
        nullif(split_part(launch_value, ' ', 1), '')                                 as point_id,
        nullif(trim(substr(launch_value, length(split_part(launch_value, ' ', 1)) + 1)), '')
                                                                                     as detail,
        source_file,
        source_line
    from launch_out
    where launch_key in ('point_error', 'point_skipped', 'profile_error')
),

launch_failures as (
    select
        run_id,
        'launch_failed'                                                        as event,
        cast(null as varchar)                                                  as point_id,
        case when launch_key = 'error' then nullif(launch_value, '')
             else 'the engine did not become ready (status=failed)' end        as detail,
        source_file,
        source_line
    from launch_out
    where launch_key = 'error' or (launch_key = 'status' and lower(launch_value) = 'failed')
    -- one per run: the error line when there is one, else the status line
    qualify row_number() over (
        partition by run_id order by (launch_key = 'error') desc, source_line
    ) = 1
),

last_status as (
    select run_id, lower(launch_value) as run_status, source_file, source_line
    from launch_out
    where launch_key = 'run_status'
    qualify row_number() over (partition by run_id order by source_line desc) = 1
),

run_lines as (
    select
        s.run_id,
        case s.run_status
            when 'interrupted' then 'run_interrupted'
            when 'engine_died' then 'engine_died'
            else 'run_failed'
        end                                                                    as event,
        cast(null as varchar)                                                  as point_id,
        case s.run_status
            when 'interrupted' then 'interrupted; the engine was stopped'
            when 'engine_died' then 'the engine stopped running during the benchmarks'
            else 'the run stopped before its benchmarks finished'
        end || coalesce('; benchmark points written: ' || p.points, '')        as detail,
        s.source_file,
        s.source_line
    from last_status as s
    left join points_written as p on p.run_id = s.run_id
    where s.run_status in ('interrupted', 'engine_died', 'failed')
      and not (s.run_status = 'failed' and s.run_id in (select run_id from launch_failures))
),

ready_lines as (
    select run_id, source_file, min(source_line) as ready_line
    from stg_log_facts
    where fact = 'ready'
    group by run_id, source_file
),

engine_errors as (
    select
        errors.run_id,
        'engine_error'                                                         as event,
        cast(null as varchar)                                                  as point_id,
        concat_ws(': ', errors.detail, nullif(errors.value_text, ''))
            || case when errors.source_line > ready.ready_line
                    then ' (after the engine became ready)'
                    else ' (in a launch that did not become ready; a later one in the same log did)'
               end                                                             as detail,
        errors.source_file,
        errors.source_line
    from stg_log_facts as errors
    inner join ready_lines as ready
        on ready.run_id = errors.run_id and ready.source_file = errors.source_file
    where errors.fact = 'error'
),

final as (
    select run_id, event, point_id, detail, source_file, source_line from point_lines
    union all
    select run_id, event, point_id, detail, source_file, source_line from engine_errors
    union all
    select run_id, event, point_id, detail, source_file, source_line from launch_failures
    union all
    select run_id, event, point_id, detail, source_file, source_line from run_lines
    order by run_id, source_line
)

select * from final

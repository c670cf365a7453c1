-- Where a run's time went: one row per run and phase, in time order, each with its start, end,
-- seconds and the raw line its times come from.
-- phase:
--   engine_start  the engine launched until it answered ready (launch.out engine_times);
--   gate          the needle gate (launch.out gate_times);
--   client_prep   a benchmark step from its start until the client sent its first request: the
--                 client building prompts and starting up (launch.out step_times start ->
--                 requests_start); prompts_waited_s, the part of it spent waiting for prompts the
--                 run's prompt bank was still building;
--   requests      the step's requests, the first sent to the last answer (requests_start ->
--                 requests_end);
--   tail          the last answer until the step ended (requests_end -> end): the client writing
--                 its result, the samplers stopping;
--   step          a step whose requests the client could not time (requests_start `-`): whole;
--   gap           time between two phases that no phase covers (the prefix cache emptied, a
--                 point's files written, the run stage's own work);
--   end           the last step's end until the run finished (launch.out finished_at): the
--                 engine stopped, the folder sealed.
-- A run written before launch.out had these lines (estimated = true): the engine's start from
-- meta.json's started_at and launch.out's ready_s; each point's client_prep, requests and tail
-- from its GPU sampler file (gpu/<point>.csv: window_start, requests_start, requests_end,
-- window_end, the sampler's window standing for the step's); the time between the engine's ready
-- and the first step, of a run that was gated, is its gate. A run with neither has no rows.
with lo as (
    select run_id, launch_key, launch_value, source_file, source_line
    from stg_launch_out
),

run_rows as (
    select run_id, started_at, source_file, source_line from stg_runs
),

-- the phases the run stage timed itself: engine_times (start, ready) and gate_times (start, end)
logged as (
    select
        run_id,
        case launch_key when 'engine_times' then 'engine_start' else 'gate' end         as phase,
        try_cast(regexp_extract(launch_value, 'start=(\S+)', 1) as timestamptz)          as start_at,
        try_cast(regexp_extract(launch_value, '(?:ready|end)=(\S+)', 1) as timestamptz)  as end_at,
        source_file,
        source_line
    from lo
    where launch_key in ('engine_times', 'gate_times')
),

engine_estimated as (
    select
        run_rows.run_id,
        run_rows.started_at                                                  as start_at,
        run_rows.started_at + to_milliseconds(cast(round(try_cast(lo.launch_value as double) * 1000) as bigint)) as end_at,
        lo.source_file,
        lo.source_line
    from run_rows
    join lo on lo.run_id = run_rows.run_id and lo.launch_key = 'ready_s'
    where run_rows.started_at is not null
      and try_cast(lo.launch_value as double) is not null
      and run_rows.run_id not in (select run_id from logged where phase = 'engine_start')
),

step_times as (
    select
        run_id,
        regexp_extract(launch_value, '^(\S+)', 1)                                          as step,
        try_cast(regexp_extract(launch_value, ' start=(\S+)', 1) as timestamptz)           as step_start,
        try_cast(regexp_extract(launch_value, ' requests_start=(\S+)', 1) as timestamptz)  as requests_start,
        try_cast(regexp_extract(launch_value, ' requests_end=(\S+)', 1) as timestamptz)    as requests_end,
        try_cast(regexp_extract(launch_value, ' end=(\S+)', 1) as timestamptz)             as step_end,
        try_cast(regexp_extract(launch_value, ' prompts_waited_s=(\S+)', 1) as double)     as prompts_waited_s,
        source_file,
        source_line,
        false                                                                              as estimated
    from lo
    where launch_key = 'step_times'
),

-- old runs: the GPU sampler's window stands for the step's
sampler_steps as (
    select
        run_id,
        point_id                                                   as step,
        to_timestamp(sampler_start_epoch_s)                        as step_start,
        case when window_from = 'requests' then to_timestamp(window_start_epoch_s) end as requests_start,
        case when window_from = 'requests' then to_timestamp(window_end_epoch_s) end   as requests_end,
        to_timestamp(sampler_end_epoch_s)                          as step_end,
        null::double                                               as prompts_waited_s,
        source_file,
        coalesce(window_start_line, sampler_start_line)            as source_line,
        true                                                       as estimated
    from int_gpu_sampler_files
    where sampler_start_epoch_s is not null and sampler_end_epoch_s is not null
      and run_id not in (select run_id from step_times)
),

steps as (
    select * from step_times
    union all
    select * from sampler_steps
),

finished as (
    select
        run_id,
        try_cast(launch_value as timestamptz)                      as end_at,
        source_file,
        source_line
    from lo
    where launch_key = 'finished_at'
),

phases as (
    select run_id, phase, null::varchar as step, start_at, end_at,
           null::double as prompts_waited_s, source_file, source_line, false as estimated
    from logged
    union all
    select run_id, 'engine_start', null, start_at, end_at, null, source_file, source_line, true
    from engine_estimated
    union all
    select run_id, 'client_prep', step, step_start, requests_start, prompts_waited_s, source_file,
           source_line, estimated
    from steps where requests_start is not null
    union all
    select run_id, 'requests', step, requests_start, requests_end, null, source_file, source_line, estimated
    from steps where requests_start is not null and requests_end is not null
    union all
    select run_id, 'tail', step, requests_end, step_end, null, source_file, source_line, estimated
    from steps where requests_end is not null
    union all
    select run_id, 'step', step, step_start, step_end, prompts_waited_s, source_file, source_line, estimated
    from steps where requests_start is null or requests_end is null
),

-- the end: the last phase's end to the run's finished_at
ends as (
    select
        finished.run_id, 'end' as phase, null::varchar as step, last.end_at as start_at,
        finished.end_at, null::double as prompts_waited_s, finished.source_file,
        finished.source_line, bool_or(last.estimated) as estimated
    from finished
    join (select run_id, max(end_at) as end_at, bool_or(estimated) as estimated
          from phases group by run_id) as last
        on last.run_id = finished.run_id
    where finished.end_at >= last.end_at
    group by all
),

timed as (
    select * from phases where start_at is not null and end_at is not null and end_at >= start_at
    union all
    select * from ends
),

ordered as (
    select
        *,
        max(end_at) over (partition by run_id order by start_at, end_at, phase, step
                          rows between unbounded preceding and 1 preceding) as before_end,
        lag(phase) over (partition by run_id order by start_at, end_at, phase, step) as before_phase
    from timed
),

-- time no phase covers, before each phase that starts after everything before it ended; right
-- after an estimated engine start, in a gated run without gate_times, the gate
gaps as (
    select
        ordered.run_id,
        case when ordered.before_phase = 'engine_start' and ordered.estimated
                  and exists (select 1 from stg_gates as g where g.run_id = ordered.run_id)
                  and not exists (select 1 from logged as t where t.run_id = ordered.run_id and t.phase = 'gate')
             then 'gate' else 'gap' end                     as phase,
        null::varchar                                       as step,
        ordered.before_end                                  as start_at,
        ordered.start_at                                    as end_at,
        null::double                                        as prompts_waited_s,
        ordered.source_file,
        ordered.source_line,
        ordered.estimated
    from ordered
    where ordered.before_end is not null and ordered.start_at > ordered.before_end
),

everything as (
    select run_id, phase, step, start_at, end_at, prompts_waited_s, source_file, source_line, estimated
    from timed
    union all
    select * from gaps
),

final as (
    select
        run_id,
        row_number() over (partition by run_id order by start_at, end_at, phase, step)::integer as phase_order,
        phase,
        step,
        start_at,
        end_at,
        (epoch_ms(end_at) - epoch_ms(start_at)) / 1000.0    as seconds,
        prompts_waited_s,
        estimated,
        source_file,
        source_line
    from everything
    order by run_id, phase_order
)

select * from final

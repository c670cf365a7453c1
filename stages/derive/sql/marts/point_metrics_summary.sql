-- One row per /metrics series file: what the engine's own /metrics said over a benchmark point
-- (point_metrics_series), summed up, with what its sampling could and could not see.
--
-- The rules of this model, declared once here (carried as columns, so that a page prints them
-- as facts and an auditor reads them beside the figures they judge):
--   series_min_readings  a point's series is drawn only when at least this many samples read the
--                        engine while its requests ran (window_readings): on a point of a second
--                        or two sampled every second, one or two reads, taken between bursts, say
--                        0 requests running while the counters show tokens generated; such a
--                        point is said to be too short for its sampling, with its count, not drawn.
--   stall_min_samples    a stall is at least this many samples in a row, each reading no token
--                        generated since the sample before while requests ran at both ends of
--                        its interval: one such sample is one engine step longer than the
--                        sampling interval (a long prefill, the profiler writing its trace), not a
--                        stall the sampling can tell.
--
-- An interval is two consecutive samples that both read the engine (a failed scrape between them
-- is passed over). stalled_s: the seconds of the intervals in runs of at least stall_min_samples
-- such intervals in a row. gen_tok_s_while_running: the tokens generated over the intervals with
-- requests running at either end, over their seconds. preemptions: the counter's rise from the
-- first reading to the last. Each maximum cites the line that holds it (the first sample to reach
-- it; with several engines, that sample's `@` line: the value is their sum).
--
-- Queueing is judged from the counters and the sequence cap together: queue_seen, a sample read a
-- request waiting; over_seq_cap, the point sent more users than the launch's sequence cap
-- (launches.seq_cap, over its data-parallel engines): the engine runs no more than that at once,
-- so the rest waited whether or not a sample caught them; queued, either. queue_missed: over the
-- cap and no sample saw a request waiting: the queue came and went between the reads
-- (window_readings over requests_s say how often they were).
with rules as (
    select 3 as series_min_readings, 2 as stall_min_samples
),

series as (
    select * from point_metrics_series
),

intervals as (
    select
        *,
        lag(running) over w                                                 as running_before,
        lag(generation_tokens_total) over w                                 as gen_before,
        t_s_of - lag(t_s_of) over w                                         as dt_s
    from (select *, epoch_us(sampled_at) / 1e6 as t_s_of from series where error is null and running is not null)
    window w as (partition by run_id, point_id, source_file order by sample_idx)
),

flagged as (
    select
        *,
        coalesce(running_before > 0 and running > 0 and generation_tokens_total <= gen_before, false)
                                                                            as stalled
    from intervals
),

-- each run of stalled intervals in a row gets one number: the intervals before it that were not
stall_runs as (
    select
        *,
        sum(case when stalled then 0 else 1 end) over (
            partition by run_id, point_id, source_file order by sample_idx
            rows between unbounded preceding and current row)               as stall_run
    from flagged
),

stalls as (
    select run_id, point_id, source_file, sum(dt_s order by sample_idx) as stall_s
    from stall_runs
    where stalled
    group by run_id, point_id, source_file, stall_run
    having count(*) >= (select stall_min_samples from rules)
),

per_point as (
    select
        run_id,
        point_id,
        source_file,
        count(*)                                                           as readings,
        count(*) filter (where in_requests)                                as window_readings,
        max(running)                                                       as running_max,
        max(preemptions)                                                   as preemptions,
        sum(generation_tokens_total - gen_before)
            filter (where (running_before > 0 or running > 0) and generation_tokens_total >= gen_before)
                                                                           as gen_running_tokens,
        sum(dt_s order by sample_idx)
            filter (where (running_before > 0 or running > 0) and generation_tokens_total >= gen_before)
                                                                           as running_s
    from flagged
    group by run_id, point_id, source_file
),

stalled as (
    select run_id, point_id, source_file, sum(stall_s) as stalled_s
    from stalls
    group by run_id, point_id, source_file
),

waiting_top as (
    select run_id, point_id, source_file, waiting as waiting_max, source_file as waiting_source_file,
           waiting_line as waiting_source_line,
           row_number() over (partition by run_id, point_id, source_file order by waiting desc, sample_idx) as n
    from series where waiting is not null
),

kv_top as (
    select run_id, point_id, source_file, kv_usage_pct as kv_usage_max_pct, source_file as kv_source_file,
           kv_line as kv_source_line,
           row_number() over (partition by run_id, point_id, source_file order by kv_usage_pct desc, sample_idx) as n
    from series where kv_usage_pct is not null
),

files as (
    select
        run_id,
        point_id,
        source_file,
        any_value(workload)                                                as workload,
        any_value(concurrency)                                             as concurrency,
        any_value(repeat)                                                  as repeat,
        count(*)                                                           as samples,
        count(*) filter (where error is not null)                          as error_samples,
        min(source_line)                                                   as source_line
    from series
    group by run_id, point_id, source_file
),

settings as (
    select run_id, point_id, source_file, sampler_exit, interval_ms,
           try_cast(requests_end as double) - try_cast(requests_start as double) as requests_s
    from int_sampler_settings
    where sampler = 'metrics'
),

caps as (
    select run_id, seq_cap::bigint * coalesce(engines, 1)                  as seq_cap
    from launches
),

final as (
    select
        f.run_id,
        f.point_id,
        f.workload,
        f.concurrency,
        f.repeat,
        f.samples,
        f.error_samples,
        coalesce(p.readings, 0)                                            as readings,
        p.running_max,
        w.waiting_max,
        k.kv_usage_max_pct,
        p.preemptions,
        coalesce(st.stalled_s, 0.0)                                        as stalled_s,
        p.gen_running_tokens / nullif(p.running_s, 0)                      as gen_tok_s_while_running,
        coalesce(w.waiting_max > 0, false) or coalesce(f.concurrency > c.seq_cap, false) as queued,
        coalesce(p.preemptions > 0, false)                                 as preempted,
        try_cast(s.interval_ms as double)                                  as interval_ms,
        s.sampler_exit,
        f.source_file,
        f.source_line,
        w.waiting_source_file,
        w.waiting_source_line,
        k.kv_source_file,
        k.kv_source_line,
        s.requests_s,
        coalesce(p.window_readings, 0)                                     as window_readings,
        coalesce(p.window_readings, 0) >= r.series_min_readings            as sampled_enough,
        r.series_min_readings,
        r.stall_min_samples,
        coalesce(w.waiting_max > 0, false)                                 as queue_seen,
        c.seq_cap,
        coalesce(f.concurrency > c.seq_cap, false)                         as over_seq_cap,
        coalesce(f.concurrency > c.seq_cap, false) and not coalesce(w.waiting_max > 0, false)
                                                                           as queue_missed
    from files as f
    cross join rules as r
    left join per_point as p using (run_id, point_id, source_file)
    left join stalled as st using (run_id, point_id, source_file)
    left join (select * from waiting_top where n = 1) as w using (run_id, point_id, source_file)
    left join (select * from kv_top where n = 1) as k using (run_id, point_id, source_file)
    left join settings as s using (run_id, point_id, source_file)
    left join caps as c on c.run_id = f.run_id
    order by f.run_id, f.point_id
)

select * from final

-- One row per /metrics series file: what the engine's own /metrics said over a benchmark point
-- (point_metrics_series), summed up. An interval is two consecutive samples that both read the
-- engine (a failed scrape between them is passed over). stalled_s: the seconds of the intervals
-- with requests running at both ends whose generation counter did not advance.
-- gen_tok_s_while_running: the tokens generated over the intervals with requests running at
-- either end, over their seconds. preemptions: the counter's rise from the first reading to the
-- last. Each maximum cites the line that holds it (the first sample to reach it; with several
-- engines, that sample's `@` line: the value is their sum).
with series as (
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

per_point as (
    select
        run_id,
        point_id,
        source_file,
        count(*)                                                           as readings,
        max(running)                                                       as running_max,
        max(preemptions)                                                   as preemptions,
        sum(dt_s order by sample_idx) filter (where running_before > 0 and running > 0
                           and generation_tokens_total <= gen_before)      as stalled_s,
        sum(generation_tokens_total - gen_before)
            filter (where (running_before > 0 or running > 0) and generation_tokens_total >= gen_before)
                                                                           as gen_running_tokens,
        sum(dt_s order by sample_idx)
            filter (where (running_before > 0 or running > 0) and generation_tokens_total >= gen_before)
                                                                           as running_s
    from intervals
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
    select run_id, point_id, source_file, sampler_exit, interval_ms
    from int_sampler_settings
    where sampler = 'metrics'
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
        coalesce(p.stalled_s, 0.0)                                         as stalled_s,
        p.gen_running_tokens / nullif(p.running_s, 0)                      as gen_tok_s_while_running,
        coalesce(w.waiting_max > 0, false)                                 as queued,
        coalesce(p.preemptions > 0, false)                                 as preempted,
        try_cast(s.interval_ms as double)                                  as interval_ms,
        s.sampler_exit,
        f.source_file,
        f.source_line,
        w.waiting_source_file,
        w.waiting_source_line,
        k.kv_source_file,
        k.kv_source_line
    from files as f
    left join per_point as p using (run_id, point_id, source_file)
    left join (select * from waiting_top where n = 1) as w using (run_id, point_id, source_file)
    left join (select * from kv_top where n = 1) as k using (run_id, point_id, source_file)
    left join settings as s using (run_id, point_id, source_file)
    order by f.run_id, f.point_id
)

select * from final

-- One row per sample of a /metrics series file (bench/<point_id>.metrics-series.txt): what the
-- engine's own /metrics said during a benchmark point, second by second (int_metrics_series_samples:
-- the families read, summed over engines). seconds: since the point's requests_start, else since
-- the file's first sample. Rates are a counter's change since the sample before that read it (a
-- failed scrape is passed over), over the time between them; a counter that went back (the
-- engine restarted) gives none; rate_from_s: the seconds of that sample before, so that a rate
-- is drawn over the interval it was measured on, not at its end alone. preemptions: the counter's
-- rise since the file's first reading. in_requests: the sample was read while the point's
-- requests ran (from the file's requests_start to its requests_end, both included); every sample
-- of a file without that window.
with samples as (
    select * from int_metrics_series_samples
),

readings as (
    select
        run_id,
        point_id,
        source_file,
        sample_idx,
        t_s,
        generation_tokens_total - lag(generation_tokens_total) over w      as gen_delta,
        prompt_tokens_total - lag(prompt_tokens_total) over w              as prompt_delta,
        t_s - lag(t_s) over w                                              as dt_s,
        lag(t_s - zero_s) over w                                           as from_s,
        preemptions_total - first_value(preemptions_total) over w          as preemptions
    from samples
    where error is null and generation_tokens_total is not null
    window w as (partition by run_id, point_id, source_file order by sample_idx
                 rows between unbounded preceding and current row)
),

final as (
    select
        s.run_id,
        s.point_id,
        points.workload,
        points.concurrency,
        points.repeat,
        s.sample_idx,
        to_timestamp(s.t_s)                                                as sampled_at,
        s.t_s - s.zero_s                                                   as seconds,
        coalesce(s.t_s between s.requests_start_s and s.requests_end_s, true) as in_requests,
        s.running,
        s.waiting,
        s.kv_usage_pct,
        case when r.gen_delta >= 0 and r.dt_s > 0 then r.gen_delta / r.dt_s end       as gen_tok_s,
        case when r.prompt_delta >= 0 and r.dt_s > 0 then r.prompt_delta / r.dt_s end as prompt_tok_s,
        case when r.gen_delta >= 0 and r.dt_s > 0 then r.from_s end       as rate_from_s,
        r.preemptions,
        s.generation_tokens_total,
        s.error,
        s.source_file,
        s.source_line,
        s.running_line,
        s.waiting_line,
        s.kv_line
    from samples as s
    left join readings as r
        on r.run_id = s.run_id and r.point_id = s.point_id and r.source_file = s.source_file
        and r.sample_idx = s.sample_idx
    left join stg_bench_points as points
        on points.run_id = s.run_id and points.point_id = s.point_id
    order by s.run_id, s.point_id, s.sample_idx
)

select * from final

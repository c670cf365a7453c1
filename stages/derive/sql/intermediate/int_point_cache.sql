-- Share of prompt tokens the engine served from its prefix cache during each benchmark point.
-- From the engine's /metrics counters: 100 * (hits after - hits before) / (queries after - queries
-- before), each counter summed over its label sets. vLLM: vllm:prefix_cache_* (current), else
-- vllm:gpu_prefix_cache_* (older builds). SGLang: sglang:cached_tokens_total over
-- sglang:prompt_tokens_total (served with --enable-metrics); where a snapshot has a
-- cache_source="total" label set beside the per-tier ones, that one alone is counted.
-- Without counters, an SGLang point falls back to its own log: the `Prefill batch` lines
-- (#cached-token over #new-token plus #cached-token) logged while the point ran, from its result
-- file's `date` (written when it finished, to the second) less its `duration`, one second either
-- side for the clocks' rounding; the log times must carry their date. The line cited is the first
-- such line. Null when neither is there or no prompt token was counted.
with samples as (
    select
        run_id,
        point_id,
        phase,
        case
            when metric_name in ('vllm:prefix_cache_hits_total', 'vllm:prefix_cache_hits') then 'hits'
            when metric_name in ('vllm:prefix_cache_queries_total', 'vllm:prefix_cache_queries') then 'queries'
            when metric_name in ('vllm:gpu_prefix_cache_hits_total', 'vllm:gpu_prefix_cache_hits') then 'hits'
            when metric_name in ('vllm:gpu_prefix_cache_queries_total', 'vllm:gpu_prefix_cache_queries') then 'queries'
            when metric_name in ('sglang:cached_tokens_total', 'sglang:cached_tokens') then 'hits'
            when metric_name in ('sglang:prompt_tokens_total', 'sglang:prompt_tokens') then 'queries'
        end                                                     as counter,
        case
            when metric_name like 'vllm:gpu_%' then 2
            when metric_name like 'sglang:%' then 3
            else 1
        end                                                     as generation,
        metric_value,
        source_file,
        source_line
    from stg_metrics
    where phase in ('before', 'after')
      and not (metric_name like 'sglang:cached_tokens%'
               and coalesce(metric_labels, '') not like '%cache_source="total"%'
               and exists (select 1 from stg_metrics as totals
                           where totals.run_id = stg_metrics.run_id
                             and totals.point_id = stg_metrics.point_id
                             and totals.phase = stg_metrics.phase
                             and totals.metric_name = stg_metrics.metric_name
                             and totals.metric_labels like '%cache_source="total"%'))
),

sums as (
    select
        run_id,
        point_id,
        generation,
        sum(metric_value) filter (where phase = 'before' and counter = 'hits')    as hits_before,
        sum(metric_value) filter (where phase = 'after' and counter = 'hits')     as hits_after,
        sum(metric_value) filter (where phase = 'before' and counter = 'queries') as queries_before,
        sum(metric_value) filter (where phase = 'after' and counter = 'queries')  as queries_after,
        min(source_file) filter (where phase = 'after' and counter = 'hits')      as source_file,
        min(source_line) filter (where phase = 'after' and counter = 'hits')      as source_line
    from samples
    where counter is not null
    group by run_id, point_id, generation
),

counted as (
    select
        run_id,
        point_id,
        generation,
        hits_after - hits_before                        as hits_delta,
        queries_after - queries_before                  as queries_delta,
        source_file,
        source_line
    from sums
    where hits_before is not null and hits_after is not null
      and queries_before is not null and queries_after is not null
),

windows as (
    select
        run_id,
        point_id,
        try_strptime(bench_date, '%Y%m%d-%H%M%S')                                    as ended_at,
        duration_s
    from stg_bench_points
    -- vllm bench serve's `date` (when it finished); another tool's date may mean its start
    where try_strptime(bench_date, '%Y%m%d-%H%M%S') is not null and duration_s is not null
      and tool is null
),

prefills as (
    select
        run_id,
        new_tokens,
        cached_tokens,
        try_strptime(log_time, '%Y-%m-%d %H:%M:%S')     as logged_at,
        source_file,
        source_line
    from stg_log_stats
    where kind = 'sglang_prefill' and new_tokens is not null and cached_tokens is not null
),

logged as (
    select
        windows.run_id,
        windows.point_id,
        4                                               as generation,
        sum(prefills.cached_tokens)                     as hits_delta,
        sum(prefills.new_tokens + prefills.cached_tokens) as queries_delta,
        min(prefills.source_file)                       as source_file,
        min(prefills.source_line)                       as source_line
    from windows
    inner join prefills
        on prefills.run_id = windows.run_id
       and prefills.logged_at >= windows.ended_at - to_microseconds(((windows.duration_s + 1) * 1e6)::bigint)
       and prefills.logged_at <= windows.ended_at + interval '1 second'
    group by windows.run_id, windows.point_id
),

chosen as (
    select * from (select * from counted union all select * from logged)
    qualify row_number() over (partition by run_id, point_id order by generation) = 1
),

final as (
    select
        run_id,
        point_id,
        hits_delta,
        queries_delta,
        case
            when queries_delta > 0 then 100.0 * hits_delta / queries_delta
        end                                             as cache_hit_pct,
        source_file,
        source_line
    from chosen
)

select * from final

-- One row per agents workload of a run: `sessions` concurrent sessions, each re-sending its growing
-- history (a shared opening plus its own turns) for `turns` turns.
-- planned = sessions * turns; sent: request rows; completed / failed: without and with an error.
-- history_tokens_max: the largest prompt the server reported.
-- ttft_median_s / ttft_p90_s / ttft_p99_s: median, quantile_cont(0.9) and (0.99) of TTFT over
--   successful requests.
-- tpot_median_ms: median TPOT over successful requests that did not arrive in one burst
--   (turn_requests.burst); decode_tok_s_per_user = 1000 / that.
-- output_tok_s: output tokens of successful requests over the span from the first send to the
--   last finish (started_s + latency_s, every request that has one).
-- cache_hit_pct: the engine's prefix-cache share over the workload, from the /metrics snapshots of
--   point <workload>__sNN (null without them).
-- provisional: the run's gate scored below $gate_min_score, or the run has no gate (as bench_points).
-- source_file / source_line: the workload line.
with request_stats as (
    select
        run_id,
        workload,
        count(*)                                                as sent,
        count(*) filter (where ok)                              as completed,
        count(*) filter (where not ok)                          as failed,
        max(input_tokens)                                       as history_tokens_max,
        median(ttft_s) filter (where ok)                        as ttft_median_s,
        quantile_cont(ttft_s, 0.9) filter (where ok)            as ttft_p90_s,
        quantile_cont(ttft_s, 0.99) filter (where ok)           as ttft_p99_s,
        median(tpot_ms) filter (where ok and not burst)         as tpot_median_ms,
        coalesce(sum(output_tokens) filter (where ok), 0)       as ok_output_tokens,
        min(started_s)                                          as first_sent_s,
        max(started_s + latency_s)                              as last_done_s
    from turn_requests
    where kind = 'agents'
    group by run_id, workload
),

joined as (
    select
        workloads.run_id,
        workloads.workload,
        workloads.sessions,
        workloads.turns,
        workloads.sessions * workloads.turns                    as planned,
        coalesce(request_stats.sent, 0)                         as sent,
        coalesce(request_stats.completed, 0)                    as completed,
        coalesce(request_stats.failed, 0)                       as failed,
        request_stats.history_tokens_max,
        request_stats.ttft_median_s,
        request_stats.ttft_p90_s,
        request_stats.ttft_p99_s,
        request_stats.tpot_median_ms,
        case
            when request_stats.last_done_s > request_stats.first_sent_s
            then request_stats.ok_output_tokens / (request_stats.last_done_s - request_stats.first_sent_s)
        end                                                     as output_tok_s,
        point_cache.cache_hit_pct,
        gate_flags.provisional                            as provisional,
        workloads.source_file,
        workloads.source_line
    from stg_turn_workloads as workloads
    left join request_stats
        on request_stats.run_id = workloads.run_id and request_stats.workload = workloads.workload
    left join int_point_cache as point_cache
        on point_cache.run_id = workloads.run_id
       and point_cache.point_id = printf('%s__s%02d', workloads.workload, workloads.sessions)
    left join int_run_gate_flags as gate_flags
        on gate_flags.run_id = workloads.run_id
    where workloads.kind = 'agents'
),

final as (
    select
        run_id,
        workload,
        sessions::integer                                       as sessions,
        turns::integer                                          as turns,
        planned::integer                                        as planned,
        sent::integer                                           as sent,
        completed::integer                                      as completed,
        failed::integer                                         as failed,
        history_tokens_max::bigint                              as history_tokens_max,
        ttft_median_s::double                                   as ttft_median_s,
        ttft_p90_s::double                                      as ttft_p90_s,
        ttft_p99_s::double                                      as ttft_p99_s,
        tpot_median_ms::double                                  as tpot_median_ms,
        case when tpot_median_ms > 0 then 1000.0 / tpot_median_ms end as decode_tok_s_per_user,
        output_tok_s::double                                    as output_tok_s,
        cache_hit_pct::double                                   as cache_hit_pct,
        provisional,
        source_file,
        source_line
    from joined
)

select * from final

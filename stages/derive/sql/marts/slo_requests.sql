-- One row per request of a benchmark point whose workload has service level objectives
-- (int_slo_targets), judged as point_slo counts it.
-- A request is judged unless it was served from the prefix cache (invalid_rows reason
-- prefix_cache: its first token timed no prefill); not_judged_reason names that reason. It meets
-- the objectives (met) when it completed, its TTFT is at most ttft_s and its TPOT at most tpot_ms:
-- a target left out (null) does not apply, a request with no TTFT misses a TTFT target, and a
-- request with no TPOT (one output token) is judged by its TTFT alone. A failed request is judged
-- and misses.
with targets as (
    select run_id, point_id, ttft_target_s, tpot_target_ms from int_slo_targets
),

not_judged as (
    select run_id, point_id, request_idx, min(reason) as reason
    from invalid_rows
    where reason = 'prefix_cache'
    group by run_id, point_id, request_idx
),

judged as (
    select
        requests.run_id,
        requests.point_id,
        requests.request_idx,
        requests.workload,
        requests.concurrency,
        requests.repeat,
        not_judged.reason is null                                       as judged,
        not_judged.reason                                               as not_judged_reason,
        not requests.ok                                                 as failed,
        targets.ttft_target_s is not null
            and not coalesce(requests.ttft_s <= targets.ttft_target_s, false) as ttft_over_target,
        targets.tpot_target_ms is not null and requests.tpot_ms is not null
            and not (requests.tpot_ms <= targets.tpot_target_ms)        as tpot_over_target,
        requests.source_file,
        requests.source_line
    from bench_requests as requests
    inner join targets
        on targets.run_id = requests.run_id and targets.point_id = requests.point_id
    left join not_judged
        on not_judged.run_id = requests.run_id and not_judged.point_id = requests.point_id
       and not_judged.request_idx = requests.request_idx
),

final as (
    select
        run_id,
        point_id,
        request_idx,
        workload,
        concurrency,
        repeat,
        judged,
        not_judged_reason,
        failed,
        ttft_over_target,
        tpot_over_target,
        not (failed or ttft_over_target or tpot_over_target)            as met,
        source_file,
        source_line
    from judged
)

select * from final

-- The requests of a benchmark point (its first repeat, the row point_slo's facts print), each
-- judged against the workload's service level objectives as point_slo judges it: `slo` is 1 when
-- it met them and 0 when it missed, used unless it was served from the prefix cache (not judged);
-- `met` is the same request, used when it met them. Its path names the fields of the result file
-- it is judged by; `reason` why it missed or was not judged.
with targets as (
    select run_id, point_id, ttft_target_s, tpot_target_ms
    from point_slo
    where run_id = $run_id and workload = $workload and concurrency = $concurrency and repeat = 1
),

from_cache as (
    select distinct point_id, request_idx
    from invalid_rows
    where run_id = $run_id and workload = $workload and concurrency = $concurrency
      and reason = 'prefix_cache'
),

requests as (
    select
        r.request_idx                                                as i,
        r.source_file,
        c.request_idx is null                                        as judged,
        not r.ok                                                     as failed,
        t.ttft_target_s is not null and not coalesce(r.ttft_s <= t.ttft_target_s, false) as slow_first,
        t.tpot_target_ms is not null and r.tpot_ms is not null
            and not (r.tpot_ms <= t.tpot_target_ms)                  as slow_tokens
    from bench_requests as r
    inner join targets as t on t.run_id = r.run_id and t.point_id = r.point_id
    left join from_cache as c on c.point_id = r.point_id and c.request_idx = r.request_idx
),

final as (
    select
        source_file,
        case when failed or slow_first or slow_tokens then 0 else 1 end as slo_value,
        printf('ttfts[%d], latencies[%d], output_lens[%d], errors[%d]', i, i, i, i) as slo_path,
        judged                                                       as slo_used,
        case when failed or slow_first or slow_tokens then 0 else 1 end as met_value,
        printf('ttfts[%d], latencies[%d], output_lens[%d], errors[%d]', i, i, i, i) as met_path,
        judged and not (failed or slow_first or slow_tokens)        as met_used,
        case
            when not judged then 'prefix_cache'
            when failed then 'failed'
            when slow_first and slow_tokens then 'first token and tokens over their targets'
            when slow_first then 'first token over its target'
            when slow_tokens then 'tokens slower than their target'
        end                                                          as reason
    from requests
    order by i
)

select * from final

-- The requests of a benchmark point (its first repeat, the row point_slo's facts print), each
-- as slo_requests judges it: `slo` is 1 when it met the objectives and 0 when it missed, used
-- when it was judged; `met` is the same request, used when it was judged and met them. Its path
-- names the fields of the result file it is judged by; `reason` why it missed or was not judged.
with requests as (
    select
        r.request_idx                                                as i,
        r.source_file,
        r.judged,
        r.not_judged_reason,
        r.failed,
        r.ttft_over_target                                           as slow_first,
        r.tpot_over_target                                           as slow_tokens,
        r.met
    from slo_requests as r
    where r.run_id = $run_id and r.workload = $workload and r.concurrency = $concurrency
      and r.repeat = 1
),

final as (
    select
        source_file,
        case when met then 1 else 0 end                              as slo_value,
        printf('ttfts[%d], latencies[%d], output_lens[%d], errors[%d]', i, i, i, i) as slo_path,
        judged                                                       as slo_used,
        case when met then 1 else 0 end                              as met_value,
        printf('ttfts[%d], latencies[%d], output_lens[%d], errors[%d]', i, i, i, i) as met_path,
        judged and met                                               as met_used,
        case
            when not judged then not_judged_reason
            when failed then 'failed'
            when slow_first and slow_tokens then 'first token and tokens over their targets'
            when slow_first then 'first token over its target'
            when slow_tokens then 'tokens slower than their target'
        end                                                          as reason
    from requests
    order by i
)

select * from final

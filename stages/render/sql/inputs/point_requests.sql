-- The requests of a benchmark point, each with the three figures the point's statistics take
-- from it, where its result file holds them (the JSON path of the value), and whether the
-- statistic used it: time to first token (ttfts[i]) and prefill rate (input_lens[i] / ttfts[i],
-- tokens per second), used unless the request failed or was served from the prefix cache; time
-- per output token in milliseconds ((latencies[i] - ttfts[i]) / (output_lens[i] - 1)), used
-- unless the request failed or its output came in one burst. `reason`: its invalid_rows reasons.
with requests as (
    select point_id, request_idx as i, ttft_s, prefill_tok_s, tpot_ms, ok, source_file
    from bench_requests
    where run_id = $run_id and workload = $workload and concurrency = $concurrency
),

reasons as (
    select
        point_id,
        request_idx                                       as i,
        string_agg(reason, ', ' order by reason)          as reason,
        bool_or(reason in ('prefix_cache', 'failed'))     as no_ttft,
        bool_or(reason = 'burst_output')                  as no_tpot
    from invalid_rows
    where run_id = $run_id and workload = $workload and concurrency = $concurrency
    group by point_id, request_idx
),

final as (
    select
        r.source_file,
        r.ttft_s                                                     as ttft_value,
        printf('ttfts[%d]', r.i)                                     as ttft_path,
        r.ok and not coalesce(x.no_ttft, false)                      as ttft_used,
        r.prefill_tok_s                                              as prefill_value,
        printf('input_lens[%d] / ttfts[%d]', r.i, r.i)               as prefill_path,
        r.ok and not coalesce(x.no_ttft, false)                      as prefill_used,
        r.tpot_ms                                                    as tpot_value,
        printf('(latencies[%d] - ttfts[%d]) / (output_lens[%d] - 1)', r.i, r.i, r.i) as tpot_path,
        r.ok and not coalesce(x.no_tpot, false)                      as tpot_used,
        x.reason
    from requests as r
    left join reasons as x using (point_id, i)
    order by r.i
)

select * from final

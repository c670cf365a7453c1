-- The requests of a benchmark point, each with the three figures the point's statistics take
-- from it, where its result file holds them (the JSON path of the value), and whether the
-- statistic used it: time to first token (ttfts[i]) and prefill rate (input_lens[i] / ttfts[i],
-- tokens per second), used where it counts for the first token (bench_requests.counts_for_ttft:
-- not failed, served from the prefix cache, or a text its tokens cannot spell); time
-- per output token in milliseconds ((latencies[i] - ttfts[i]) / (output_lens[i] - 1), or
-- sum(itls[i]) / (output_lens[i] - 1) for a file without latencies: bench_requests.tpot_from), used
-- where it counts per token (counts_for_tpot: not failed, output in one burst, more tokens than
-- asked). `reason`: its invalid_rows reasons (bench_requests.invalid_reasons).
-- ttft90 and ttft99 are the time to first token again, for the p90 and p99; tpot90 and tpot99 the
-- time per output token again. A point whose figures are the benchmark
-- tool's own summary (bench_points.figures_from) lists that summary as its one input instead:
-- median_ttft_ms, p90_ttft_ms, p99_ttft_ms, median_tpot_ms, p90_tpot_ms and p99_tpot_ms of its
-- result file, as bench_points holds them. A point whose requests give a TTFT but no TPOT (neither
-- latencies nor itls: bench_points.tpot_from 'tool summary') keeps its requests for the TTFT and
-- lists the summary as the one input of its TPOT.
-- A request of another benchmark tool's file names its figures by the JSON path of its record
-- and the field inside it (bench_requests.record_path, field_paths; a JSON-lines record by its
-- line); a tool's summary names its figures by the paths of bench_points.summary_paths.
with summary as (
    select source_file, coalesce(figures_from = 'tool summary', false) as whole, ttft_median_s, ttft_p90_s,
           ttft_p99_s, tpot_median_ms, tpot_p90_ms, tpot_p99_ms, summary_paths
    from bench_points
    where run_id = $run_id and workload = $workload and concurrency = $concurrency
      and (figures_from = 'tool summary' or tpot_from = 'tool summary')
),

requests as (
    select point_id, request_idx as i, ttft_s, prefill_tok_s, tpot_ms, counts_for_ttft, counts_for_tpot,
           invalid_reasons as reason, source_file,
           case when field_paths is not null
                then coalesce(record_path || '.', printf('line %d: ', source_line)) end as record_at,
           case when field_paths is not null
                then coalesce(record_at || json_extract_string(field_paths, '$.ttft_s'),
                              'none: its record gives no time to first token')
                else printf('ttfts[%d]', request_idx) end as ttft_at,
           case when field_paths is not null
                then coalesce(record_at || json_extract_string(field_paths, '$.input_tokens') || ' / '
                              || record_at || json_extract_string(field_paths, '$.ttft_s'),
                              'none: its record gives no prompt length or time to first token')
                else printf('input_lens[%d] / ttfts[%d]', request_idx, request_idx) end as prefill_at,
           case when tpot_from = 'tool request' then record_at || json_extract_string(field_paths, '$.tpot_ms')
                when field_paths is not null
                then coalesce(printf('(%s - %s) / (%s - 1)',
                                     record_at || json_extract_string(field_paths, '$.latency_s'),
                                     record_at || json_extract_string(field_paths, '$.ttft_s'),
                                     record_at || json_extract_string(field_paths, '$.output_tokens')),
                              'none: its record gives no time per output token')
                when tpot_from = 'itls' then printf('sum(itls[%d]) / (output_lens[%d] - 1)', request_idx, request_idx)
                else printf('(latencies[%d] - ttfts[%d]) / (output_lens[%d] - 1)', request_idx, request_idx, request_idx)
           end as tpot_expr
    from bench_requests
    where run_id = $run_id and workload = $workload and concurrency = $concurrency
),

request_inputs as (
    select
        r.i,
        r.source_file,
        r.ttft_s                                                     as ttft_value,
        r.ttft_at                                                    as ttft_path,
        r.counts_for_ttft                                            as ttft_used,
        r.ttft_s                                                     as ttft90_value,
        r.ttft_at                                                    as ttft90_path,
        r.counts_for_ttft                                            as ttft90_used,
        r.ttft_s                                                     as ttft99_value,
        r.ttft_at                                                    as ttft99_path,
        r.counts_for_ttft                                            as ttft99_used,
        r.prefill_tok_s                                              as prefill_value,
        r.prefill_at                                                 as prefill_path,
        r.counts_for_ttft                                            as prefill_used,
        r.tpot_ms                                                    as tpot_value,
        r.tpot_expr                                                  as tpot_path,
        r.counts_for_tpot
            and not exists (select 1 from summary)              as tpot_used,
        r.tpot_ms                                                    as tpot90_value,
        r.tpot_expr                                                  as tpot90_path,
        r.counts_for_tpot
            and not exists (select 1 from summary)              as tpot90_used,
        r.tpot_ms                                                    as tpot99_value,
        r.tpot_expr                                                  as tpot99_path,
        r.counts_for_tpot
            and not exists (select 1 from summary)              as tpot99_used,
        r.reason
    from requests as r
    where not exists (select 1 from summary where whole)
),

summary_inputs as (
    select
        -1                                                           as i,
        source_file,
        case when whole then ttft_median_s end                       as ttft_value,
        case when whole then coalesce(json_extract_string(summary_paths, '$.median_ttft_ms') || ' (in seconds)', 'median_ttft_ms / 1000')
             else 'none: the requests give the TTFT' end             as ttft_path,
        whole and ttft_median_s is not null                          as ttft_used,
        case when whole then ttft_p90_s end                          as ttft90_value,
        case when whole then coalesce(json_extract_string(summary_paths, '$.p90_ttft_ms') || ' (in seconds)', 'p90_ttft_ms / 1000')
             else 'none: the requests give the TTFT' end             as ttft90_path,
        whole and ttft_p90_s is not null                             as ttft90_used,
        case when whole then ttft_p99_s end                          as ttft99_value,
        case when whole then coalesce(json_extract_string(summary_paths, '$.p99_ttft_ms') || ' (in seconds)', 'p99_ttft_ms / 1000')
             else 'none: the requests give the TTFT' end             as ttft99_path,
        whole and ttft_p99_s is not null                             as ttft99_used,
        cast(null as double)                                         as prefill_value,
        case when whole then 'none: no per-request timings'
             else 'none: the requests give the prefill rate' end     as prefill_path,
        false                                                        as prefill_used,
        tpot_median_ms                                               as tpot_value,
        coalesce(json_extract_string(summary_paths, '$.median_tpot_ms') || ' (in milliseconds)', 'median_tpot_ms') as tpot_path,
        tpot_median_ms is not null                                   as tpot_used,
        tpot_p90_ms                                                  as tpot90_value,
        coalesce(json_extract_string(summary_paths, '$.p90_tpot_ms') || ' (in milliseconds)', 'p90_tpot_ms') as tpot90_path,
        tpot_p90_ms is not null                                      as tpot90_used,
        tpot_p99_ms                                                  as tpot99_value,
        coalesce(json_extract_string(summary_paths, '$.p99_tpot_ms') || ' (in milliseconds)', 'p99_tpot_ms') as tpot99_path,
        tpot_p99_ms is not null                                      as tpot99_used,
        case when whole then 'the benchmark tool summary'
             else 'the benchmark tool summary: the requests hold no time per output token' end as reason
    from summary
),

final as (
    select * exclude (i) from (
        select * from request_inputs
        union all by name
        select * from summary_inputs
    )
    order by i
)

select * from final

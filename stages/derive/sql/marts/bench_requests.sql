-- One row per benchmark request. valid is false when the request is listed in invalid_rows.
-- counts_for_ttft / counts_for_tpot: the rule every statistic of the campaign applies (bench_points
-- here, render's facts and charts): a request counts for the first-token figures (time to first
-- token, prefill rate) when it was answered and no invalid_rows reason of it excludes_ttft, and
-- for the per-token figures when answered and no reason excludes_tpot; invalid_reasons says why not.
with requests as (
    select * from int_requests
),

flagged as (
    select
        run_id,
        point_id,
        request_idx,
        string_agg(reason, ', ' order by reason)    as reasons,
        bool_or(excludes_ttft)                      as no_ttft,
        bool_or(excludes_tpot)                      as no_tpot
    from invalid_rows
    group by run_id, point_id, request_idx
),

final as (
    select
        requests.run_id,
        requests.point_id,
        requests.workload,
        requests.concurrency,
        requests.repeat::integer        as repeat,
        requests.request_idx,
        requests.input_tokens,
        requests.output_tokens,
        requests.ttft_s,
        requests.latency_s,
        requests.start_time_s,
        requests.tpot_ms,
        requests.prefill_tok_s,
        requests.error,
        requests.ok,
        flagged.request_idx is null     as valid,
        requests.ok and not coalesce(flagged.no_ttft, false) as counts_for_ttft,
        requests.ok and not coalesce(flagged.no_tpot, false) as counts_for_tpot,
        flagged.reasons                 as invalid_reasons,
        requests.generated_text,
        requests.source_file,
        requests.source_line,
        requests.tpot_from,
        requests.latency_from,
        requests.record_path,
        requests.field_paths
    from requests
    left join flagged
        on flagged.run_id = requests.run_id
       and flagged.point_id = requests.point_id
       and flagged.request_idx = requests.request_idx
)

select * from final

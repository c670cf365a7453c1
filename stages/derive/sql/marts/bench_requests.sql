-- One row per benchmark request. valid is false when the request is listed in invalid_rows.
with requests as (
    select * from int_requests
),

flagged as (
    select distinct run_id, point_id, request_idx from invalid_rows
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

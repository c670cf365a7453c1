-- Per-request rows of each benchmark point.
with source as (
    select * from raw.raw_bench_requests
),

final as (
    select
        run_id::varchar               as run_id,
        point_id::varchar             as point_id,
        request_idx::integer          as request_idx,
        input_tokens::bigint          as input_tokens,
        output_tokens::bigint         as output_tokens,
        ttft_s::double                as ttft_s,
        latency_s::double             as latency_s,
        itl_count::integer            as itl_count,
        itl_sum_s::double             as itl_sum_s,
        start_time_s::double          as start_time_s,
        queue_time_s::double          as queue_time_s,
        error::varchar                as error,
        generated_text::varchar       as generated_text,
        source_file::varchar          as source_file,
        source_line::integer          as source_line,
        tpot_ms::double               as tool_tpot_ms,
        record_path::varchar          as record_path,
        field_paths::varchar          as field_paths
    from source
)

select * from final

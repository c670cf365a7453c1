-- One benchmark result file per point.
with source as (
    select * from raw.raw_bench_points
),

final as (
    select
        run_id::varchar                   as run_id,
        point_id::varchar                 as point_id,
        workload::varchar                 as workload,
        concurrency::integer              as concurrency,
        coalesce(repeat, 1)::integer      as repeat,
        backend::varchar                  as backend,
        date::varchar                     as bench_date,
        model_id::varchar                 as model_id,
        num_prompts::integer              as num_prompts,
        request_rate::double              as request_rate,
        max_concurrency::integer          as max_concurrency,
        duration_s::double                as duration_s,
        completed::integer                as completed,
        failed::integer                   as failed,
        total_input_tokens::bigint        as total_input_tokens,
        total_output_tokens::bigint       as total_output_tokens,
        request_throughput::double        as request_throughput,
        output_throughput::double         as output_tok_s,
        total_token_throughput::double    as total_tok_s,
        mean_ttft_ms::double              as mean_ttft_ms,
        median_ttft_ms::double            as median_ttft_ms,
        p90_ttft_ms::double               as p90_ttft_ms,
        p99_ttft_ms::double               as p99_ttft_ms,
        mean_tpot_ms::double              as mean_tpot_ms,
        median_tpot_ms::double            as median_tpot_ms,
        p90_tpot_ms::double               as p90_tpot_ms,
        p99_tpot_ms::double               as p99_tpot_ms,
        mean_itl_ms::double               as mean_itl_ms,
        median_itl_ms::double             as median_itl_ms,
        mean_e2el_ms::double              as mean_e2el_ms,
        median_e2el_ms::double            as median_e2el_ms,
        metadata_json::varchar            as metadata_json,
        source_file::varchar              as source_file,
        source_line::integer              as source_line,
        tool::varchar                     as tool,
        tool_version::varchar             as tool_version,
        summary_paths::varchar            as summary_paths,
        value_lines::varchar              as value_lines
    from source
)

select * from final

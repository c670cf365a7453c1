-- Per-request rows of the multi-turn workloads.
with source as (
    select * from raw.raw_turn_requests
),

final as (
    select
        run_id::varchar               as run_id,
        workload::varchar             as workload,
        kind::varchar                 as kind,
        point_id::varchar             as point_id,
        session::integer              as session,
        turn::integer                 as turn,
        request_idx::integer          as request_idx,
        target_tokens::bigint         as target_tokens,
        input_tokens::bigint          as input_tokens,
        output_tokens::bigint         as output_tokens,
        ttft_s::double                as ttft_s,
        latency_s::double             as latency_s,
        max_itl_s::double             as max_itl_s,
        started_s::double             as started_s,
        needle_ok::boolean            as needle_ok,
        answer::varchar               as answer,
        error::varchar                as error,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

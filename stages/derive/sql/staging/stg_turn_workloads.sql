-- Multi-turn workload lines (ramp.log, agents.<workload>.jsonl) with their done line's figures.
with source as (
    select * from raw.raw_turn_workloads
),

final as (
    select
        run_id::varchar               as run_id,
        workload::varchar             as workload,
        kind::varchar                 as kind,
        sessions::integer             as sessions,
        turns::integer                as turns,
        output_tokens::integer        as output_tokens,
        seed::bigint                  as seed,
        params_json::varchar          as params_json,
        started_at::timestamptz       as started_at,
        done_requests::integer        as done_requests,
        done_failed::integer          as done_failed,
        done_wall_s::double           as done_wall_s,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

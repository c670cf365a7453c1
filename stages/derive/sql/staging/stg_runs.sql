-- meta.json of each run (or what was recovered from the run id, cmd.sh and the log, with the
-- profile and spec of import.json where the run was imported).
with source as (
    select * from raw.raw_runs
),

final as (
    select
        run_id::varchar               as run_id,
        spec::varchar                 as spec,
        profile::varchar              as profile,
        model::varchar                as model,
        layout::varchar               as layout,
        ctx_label::varchar            as ctx_label,
        engine::varchar               as engine,
        engine_version::varchar       as engine_version,
        image::varchar                as image,
        image_digest::varchar         as image_digest,
        executor::varchar             as executor,
        gpus::varchar                 as gpus,
        git_sha::varchar              as git_sha,
        params_hash::varchar          as params_hash,
        started_at::timestamptz       as started_at,
        finished_at::timestamptz      as finished_at,
        schema_version::integer       as schema_version,
        recovered::boolean            as recovered,
        spec_json::varchar            as spec_json,
        source_file::varchar          as source_file,
        source_line::integer          as source_line,
        gpu_count::integer            as gpu_count,
        imported_from::varchar        as imported_from,
        imported_at::timestamptz      as imported_at,
        imported_by::varchar          as imported_by,
        imported_kind::varchar        as imported_kind
    from source
)

select * from final

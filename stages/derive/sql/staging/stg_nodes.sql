-- meta.json of each node probe folder (or what the folder name says when it is absent).
with source as (
    select * from raw.raw_nodes
),

final as (
    select
        node_id::varchar              as node_id,
        folder::varchar               as folder,
        node_kind::varchar            as node_kind,
        status::varchar               as status,
        backend::varchar              as backend,
        device::varchar               as device,
        device_count::integer         as device_count,
        groups_asked::varchar         as groups_asked,
        iters::integer                as iters,
        warmup::integer               as warmup,
        sizes::varchar                as sizes,
        p2p_bytes::bigint             as p2p_bytes,
        p2p_repeats::integer          as p2p_repeats,
        skipped::varchar              as skipped,
        error::varchar                as error,
        git_sha::varchar              as git_sha,
        started_at::timestamptz       as started_at,
        finished_at::timestamptz      as finished_at,
        schema_version::integer       as schema_version,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

-- The all-reduce groups a node probe swept (meta.json groups) and how each ended.
with source as (
    select * from raw.raw_node_groups
),

final as (
    select
        node_id::varchar              as node_id,
        group_label::varchar          as gpu_group,
        gpus::varchar                 as gpus,
        status::varchar               as status,
        sizes_measured::integer       as sizes_measured,
        error::varchar                as error,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

-- nvlink.txt: the state and speed of each NVLink of each GPU.
with source as (
    select * from raw.raw_node_nvlinks
),

final as (
    select
        node_id::varchar              as node_id,
        gpu_index::integer            as gpu_index,
        link::integer                 as link,
        link_gb_s::double             as link_gbs,
        active::boolean               as active,
        state::varchar                as state,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

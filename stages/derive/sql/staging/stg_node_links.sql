-- topo.txt of each node probe: one row per cell of the nvidia-smi topo -m matrix.
with source as (
    select * from raw.raw_node_links
),

final as (
    select
        node_id::varchar              as node_id,
        device::varchar               as device,
        peer::varchar                 as peer,
        link::varchar                 as link,
        link_kind::varchar            as link_kind,
        nvlinks::integer              as nvlinks,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

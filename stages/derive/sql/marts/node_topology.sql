-- The nvidia-smi topo -m matrix of each probed node, one row per (device, peer) cell. For two
-- GPUs, same_island says whether NVLink joins them (directly or through other GPUs); pairs in
-- different islands reach each other over PCIe and the link between CPU sockets.
with links as (
    select * from stg_node_links
),

indexed as (
    select
        *,
        case when regexp_full_match(device, 'GPU[0-9]+') then cast(substr(device, 4) as integer) end as gpu_index,
        case when regexp_full_match(peer, 'GPU[0-9]+') then cast(substr(peer, 4) as integer) end as peer_gpu_index
    from links
),

final as (
    select
        indexed.node_id,
        indexed.device,
        indexed.peer,
        indexed.gpu_index,
        indexed.peer_gpu_index,
        indexed.link,
        indexed.link_kind,
        indexed.nvlinks,
        case
            when indexed.gpu_index is null or indexed.peer_gpu_index is null then null
            else a.island_first_gpu = b.island_first_gpu
        end                                 as same_island,
        indexed.source_file,
        indexed.source_line
    from indexed
    left join int_node_islands as a on a.node_id = indexed.node_id and a.gpu_index = indexed.gpu_index
    left join int_node_islands as b on b.node_id = indexed.node_id and b.gpu_index = indexed.peer_gpu_index
)

select * from final

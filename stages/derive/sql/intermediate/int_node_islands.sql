-- NVLink islands of each probed node: GPUs joined by NVLink, directly or through other GPUs, from
-- the topo.txt matrix. island_first_gpu (the lowest GPU index of the island) names the island;
-- island_label lists its GPUs as the probe names groups ("0-3", or "0,2" when not a range).
-- A node without topo.txt has no rows here.
with recursive gpu_links as (
    select
        node_id,
        cast(substr(device, 4) as integer)  as gpu_index,
        cast(substr(peer, 4) as integer)    as peer_gpu_index,
        link_kind
    from stg_node_links
    where regexp_full_match(device, 'GPU[0-9]+')
      and regexp_full_match(peer, 'GPU[0-9]+')
),

gpus as (
    select distinct node_id, gpu_index
    from gpu_links
),

nvlink_edges as (
    select node_id, gpu_index, peer_gpu_index
    from gpu_links
    where link_kind = 'nvlink'
),

reach(node_id, gpu_index, other_gpu_index) as (
    select node_id, gpu_index, gpu_index
    from gpus
    union
    select reach.node_id, reach.gpu_index, nvlink_edges.peer_gpu_index
    from reach
    join nvlink_edges
      on nvlink_edges.node_id = reach.node_id
     and nvlink_edges.gpu_index = reach.other_gpu_index
),

islands as (
    select
        node_id,
        gpu_index,
        min(other_gpu_index)                                        as island_first_gpu,
        max(other_gpu_index)                                        as island_last_gpu,
        count(distinct other_gpu_index)                             as island_gpus,
        string_agg(distinct other_gpu_index::varchar, ',' order by other_gpu_index::varchar) as members
    from reach
    group by node_id, gpu_index
),

final as (
    select
        node_id,
        gpu_index,
        island_first_gpu,
        island_gpus::integer                                        as island_gpus,
        case
            when island_gpus = 1 then island_first_gpu::varchar
            when island_last_gpu - island_first_gpu + 1 = island_gpus
                then island_first_gpu::varchar || '-' || island_last_gpu::varchar
            else members
        end                                                         as island_label
    from islands
)

select * from final

-- Cells of one node's topology matrix, in the order nvidia-smi prints them: GPUs by index, then
-- the other devices by name. The article lays them out as a matrix.
with cells as (
    select *
    from node_topology
    where node_id = $node_id
),

final as (
    select
        device,
        peer,
        link,
        link_kind,
        same_island,
        gpu_index is null                   as device_is_other,
        peer_gpu_index is null              as peer_is_other
    from cells
    order by device_is_other, gpu_index, device, peer_is_other, peer_gpu_index, peer
)

select * from final

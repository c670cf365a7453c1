-- Peer-to-peer copies between each ordered pair of GPUs of a probed node, beside the link the
-- topology matrix shows for the pair. copy_gbs is the median of the repeats, in GB/s (1e9 bytes).
with p2p as (
    select * from stg_node_p2p
),

final as (
    select
        p2p.node_id,
        p2p.src_gpu,
        p2p.dst_gpu,
        p2p.can_access_peer,
        p2p.copy_bytes,
        p2p.repeats,
        p2p.time_us_median,
        p2p.copy_gbs,
        p2p.copy_gbs_max,
        topo.link,
        topo.link_kind,
        topo.same_island,
        p2p.source_file,
        p2p.source_line
    from p2p
    left join node_topology as topo
      on topo.node_id = p2p.node_id
     and topo.gpu_index = p2p.src_gpu
     and topo.peer_gpu_index = p2p.dst_gpu
)

select * from final

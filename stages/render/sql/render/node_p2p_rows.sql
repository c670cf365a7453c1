-- Peer-to-peer copies of one node probe, ordered by source and destination GPU.
with pairs as (
    select *
    from node_p2p
    where node_id = $node_id
),

final as (
    select
        node_id,
        src_gpu,
        dst_gpu,
        'GPU' || src_gpu::varchar           as src_label,
        'GPU' || dst_gpu::varchar           as dst_label,
        coalesce(link, '-')                 as link,
        can_access_peer
    from pairs
    order by src_gpu, dst_gpu
)

select * from final

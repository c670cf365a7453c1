-- Median peer-to-peer copy bandwidth from one GPU to another, GB/s (1e9 bytes per second).
with pair as (
    select *
    from node_p2p
    where node_id = $node_id and src_gpu = $src_gpu and dst_gpu = $dst_gpu
),

final as (
    select
        copy_gbs as value,
        'GB/s' as unit,
        cast(null as varchar) as run_id,
        source_file,
        source_line
    from pair
)

select * from final

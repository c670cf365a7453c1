-- NVLinks bonded between two devices of a probed node (the NV# cell of nvidia-smi topo -m).
with cell as (
    select *
    from node_topology
    where node_id = $node_id and device = $device and peer = $peer
),

final as (
    select
        nvlinks as value,
        'NVLinks' as unit,
        cast(null as varchar) as run_id,
        source_file,
        source_line
    from cell
)

select * from final

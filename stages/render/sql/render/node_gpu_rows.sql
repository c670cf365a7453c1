-- GPUs of one node probe, in index order, with the text columns the inventory table prints.
with final as (
    select
        node_id,
        gpu_index,
        'GPU' || gpu_index::varchar         as gpu_label,
        name,
        pci_bus_id,
        cpu_affinity,
        numa_affinity,
        nvlink_island
    from node_gpus
    where node_id = $node_id
    order by gpu_index
)

select * from final

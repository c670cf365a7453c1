-- One row per GPU of each probed node: what nvidia-smi listed, the CPU cores and NUMA node the
-- topology matrix pairs it with, its NVLink island, and its active NVLinks with their speed.
with gpus as (
    select * from stg_node_gpus
),

affinity as (
    select
        node_id,
        cast(substr(device, 4) as integer)  as gpu_index,
        cpu_affinity,
        numa_affinity
    from stg_node_affinity
    where regexp_full_match(device, 'GPU[0-9]+')
),

links as (
    select
        node_id,
        gpu_index,
        count(*) filter (where active)      as active_nvlinks,
        max(link_gbs)                       as nvlink_link_gbs
    from stg_node_nvlinks
    group by node_id, gpu_index
),

final as (
    select
        gpus.node_id,
        gpus.gpu_index,
        gpus.name,
        gpus.uuid,
        gpus.pci_bus_id,
        gpus.memory_total_mib,
        gpus.power_limit_w,
        gpus.clocks_max_sm_mhz,
        gpus.driver_version,
        affinity.cpu_affinity,
        affinity.numa_affinity,
        islands.island_label                as nvlink_island,
        links.active_nvlinks::integer       as active_nvlinks,
        links.nvlink_link_gbs,
        gpus.source_file,
        gpus.source_line
    from gpus
    left join affinity on affinity.node_id = gpus.node_id and affinity.gpu_index = gpus.gpu_index
    left join int_node_islands as islands
      on islands.node_id = gpus.node_id and islands.gpu_index = gpus.gpu_index
    left join links on links.node_id = gpus.node_id and links.gpu_index = gpus.gpu_index
)

select * from final

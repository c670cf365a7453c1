-- gpus.csv of each node probe: one row per GPU as nvidia-smi listed it.
with source as (
    select * from raw.raw_node_gpus
),

final as (
    select
        node_id::varchar              as node_id,
        gpu_index::integer            as gpu_index,
        name::varchar                 as name,
        uuid::varchar                 as uuid,
        pci_bus_id::varchar           as pci_bus_id,
        memory_total_mib::double      as memory_total_mib,
        driver_version::varchar       as driver_version,
        power_limit_w::double         as power_limit_w,
        clocks_max_sm_mhz::double     as clocks_max_sm_mhz,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

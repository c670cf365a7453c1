-- topo.txt: the CPU and NUMA affinity printed beside each row of the matrix.
with source as (
    select * from raw.raw_node_affinity
),

final as (
    select
        node_id::varchar              as node_id,
        device::varchar               as device,
        cpu_affinity::varchar         as cpu_affinity,
        numa_affinity::varchar        as numa_affinity,
        gpu_numa_id::varchar          as gpu_numa_id,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

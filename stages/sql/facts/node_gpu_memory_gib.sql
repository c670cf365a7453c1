-- Total memory of one GPU in GiB (nvidia-smi reports MiB).
with gpu as (
    select *
    from node_gpus
    where node_id = $node_id and gpu_index = $gpu_index
),

final as (
    select
        memory_total_mib / 1024.0 as value,
        'GiB' as unit,
        cast(null as varchar) as run_id,
        source_file,
        source_line
    from gpu
)

select * from final

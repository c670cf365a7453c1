-- env.json of each node probe: driver, CUDA, torch, NCCL and Python versions.
with source as (
    select * from raw.raw_node_env
),

final as (
    select
        node_id::varchar              as node_id,
        driver::varchar               as driver_version,
        cuda::varchar                 as cuda_version,
        torch::varchar                as torch_version,
        nccl::varchar                 as nccl_version,
        python::varchar               as python_version,
        platform::varchar             as platform,
        gpu_count::integer            as gpu_count,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

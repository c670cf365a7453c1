-- One row per node probe folder: what the machine is (GPUs, software versions, NVLink islands)
-- and how the probe ended. gpu_count comes from gpus.csv, else env.json, else meta.json.
-- is_latest marks the most recent probe of each node kind. A git_sha that is not a commit hash
-- (older probes wrote the word HEAD) is left out.
with probes as (
    select * from stg_nodes
),

env as (
    select * from stg_node_env
    qualify row_number() over (partition by node_id order by source_line) = 1
),

gpus as (
    select
        node_id,
        count(*)                                            as gpu_count,
        string_agg(distinct name, ', ' order by name)       as gpu_name,
        min(memory_total_mib)                               as gpu_memory_total_mib
    from stg_node_gpus
    group by node_id
),

islands as (
    select
        node_id,
        count(distinct island_first_gpu)                    as nvlink_islands,
        string_agg(distinct island_label, ' ' order by island_label) as nvlink_island_labels
    from int_node_islands
    group by node_id
),

nvls as (
    select node_id, any_value(value) as nccl_nvls_enable
    from stg_node_env_vars
    where name = 'NCCL_NVLS_ENABLE'
    group by node_id
),

joined as (
    select
        probes.node_id,
        probes.node_kind,
        probes.status,
        probes.backend,
        probes.device,
        coalesce(gpus.gpu_count, env.gpu_count, probes.device_count)::integer as gpu_count,
        gpus.gpu_name,
        gpus.gpu_memory_total_mib,
        env.driver_version,
        env.cuda_version,
        env.torch_version,
        env.nccl_version,
        islands.nvlink_islands::integer                     as nvlink_islands,
        islands.nvlink_island_labels,
        nvls.nccl_nvls_enable,
        probes.started_at,
        probes.finished_at,
        case when regexp_full_match(probes.git_sha, '[0-9a-f]+') and length(probes.git_sha) between 7 and 40
             then probes.git_sha end                        as git_sha,
        probes.source_file,
        probes.source_line
    from probes
    left join env on env.node_id = probes.node_id
    left join gpus on gpus.node_id = probes.node_id
    left join islands on islands.node_id = probes.node_id
    left join nvls on nvls.node_id = probes.node_id
),

final as (
    select
        node_id, node_kind, status, backend, device, gpu_count, gpu_name, gpu_memory_total_mib,
        driver_version, cuda_version, torch_version, nccl_version, nvlink_islands,
        nvlink_island_labels, nccl_nvls_enable, started_at, finished_at, git_sha,
        row_number() over (partition by node_kind order by started_at desc nulls last, node_id desc) = 1
                                                            as is_latest,
        source_file,
        source_line
    from joined
)

select * from final

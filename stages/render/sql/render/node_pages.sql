-- The node probes an article shows: the latest probe of each node kind, newest first.
with latest as (
    select *
    from nodes
    where is_latest
),

final as (
    select
        node_id,
        node_kind,
        status,
        gpu_name,
        gpu_count,
        nvlink_islands,
        nvlink_island_labels,
        driver_version,
        cuda_version,
        torch_version,
        nccl_version,
        nccl_nvls_enable,
        (select count(*) from node_p2p as p where p.node_id = latest.node_id) as p2p_pairs,
        (select count(*) from node_allreduce_peak as a where a.node_id = latest.node_id) as allreduce_groups
    from latest
    order by started_at desc nulls last, node_id
)

select * from final

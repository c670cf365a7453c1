-- One all-reduce measurement per probed node, GPU group and message size, with nccl-tests'
-- definitions: algbw_gbs = message bytes / time, busbw_gbs = algbw_gbs * bus_factor, where
-- bus_factor = 2(n-1)/n for n ranks. spans_islands: the group's GPUs lie in more than one NVLink
-- island, so part of its traffic crosses PCIe and the CPU socket link (null without topo.txt).
with sweeps as (
    select * from stg_node_allreduce
),

group_gpus as (
    select distinct
        node_id,
        gpu_group,
        cast(trim(unnest(string_split(gpus, ','))) as integer) as gpu_index
    from sweeps
),

group_islands as (
    select
        group_gpus.node_id,
        group_gpus.gpu_group,
        case
            when count(islands.gpu_index) < count(*) then null
            else count(distinct islands.island_first_gpu) > 1
        end                                 as spans_islands
    from group_gpus
    left join int_node_islands as islands
      on islands.node_id = group_gpus.node_id and islands.gpu_index = group_gpus.gpu_index
    group by group_gpus.node_id, group_gpus.gpu_group
),

final as (
    select
        sweeps.node_id,
        sweeps.gpu_group,
        sweeps.gpus,
        sweeps.ranks,
        sweeps.backend,
        sweeps.device,
        sweeps.dtype,
        sweeps.message_bytes,
        sweeps.elements,
        sweeps.iters,
        sweeps.warmup,
        sweeps.time_us,
        sweeps.time_us_min,
        sweeps.time_us_max,
        sweeps.algbw_gbs,
        sweeps.busbw_gbs,
        2.0 * (sweeps.ranks - 1) / sweeps.ranks as bus_factor,
        sweeps.correct,
        group_islands.spans_islands,
        sweeps.source_file,
        sweeps.source_line
    from sweeps
    left join group_islands
      on group_islands.node_id = sweeps.node_id and group_islands.gpu_group = sweeps.gpu_group
)

select * from final

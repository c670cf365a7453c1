-- The best bus bandwidth each GPU group of a probed node reached over its message-size sweep,
-- with the message size and line where it did (the larger message wins a tie), and that bandwidth
-- as a share of the mean peer-to-peer copy bandwidth between the group's GPUs (node_p2p).
with sweeps as (
    select * from node_allreduce
),

peak as (
    select *
    from sweeps
    qualify row_number() over (partition by node_id, gpu_group
                               order by busbw_gbs desc, message_bytes desc) = 1
),

per_group as (
    select
        node_id,
        gpu_group,
        count(*)                            as sizes_measured,
        bool_and(coalesce(correct, false))  as all_correct,
        min(message_bytes)                  as min_message_bytes,
        max(message_bytes)                  as max_message_bytes
    from sweeps
    group by node_id, gpu_group
),

members as (
    select node_id, gpu_group, cast(trim(unnest(string_split(gpus, ','))) as integer) as gpu_index
    from peak
),

copies as (
    select
        src.node_id,
        src.gpu_group,
        avg(p2p.copy_gbs order by p2p.src_gpu, p2p.dst_gpu) as p2p_copy_gbs
    from node_p2p as p2p
    join members as src on src.node_id = p2p.node_id and src.gpu_index = p2p.src_gpu
    join members as dst
        on dst.node_id = src.node_id and dst.gpu_group = src.gpu_group and dst.gpu_index = p2p.dst_gpu
    group by src.node_id, src.gpu_group
),

final as (
    select
        peak.node_id,
        peak.gpu_group,
        peak.gpus,
        peak.ranks,
        peak.spans_islands,
        peak.busbw_gbs,
        peak.algbw_gbs,
        peak.message_bytes,
        peak.time_us,
        per_group.sizes_measured::integer   as sizes_measured,
        per_group.min_message_bytes,
        per_group.max_message_bytes,
        per_group.all_correct,
        copies.p2p_copy_gbs,
        100.0 * peak.busbw_gbs / copies.p2p_copy_gbs  as busbw_p2p_pct,
        peak.source_file,
        peak.source_line
    from peak
    join per_group on per_group.node_id = peak.node_id and per_group.gpu_group = peak.gpu_group
    left join copies on copies.node_id = peak.node_id and copies.gpu_group = peak.gpu_group
)

select * from final

-- One group's best all-reduce bus bandwidth as a share of the mean peer-to-peer copy bandwidth
-- between the group's GPUs, percent.
with peak as (
    select *
    from node_allreduce_peak
    where node_id = $node_id and gpu_group = $gpu_group
),

members as (
    select cast(trim(unnest(string_split(gpus, ','))) as integer) as gpu_index
    from peak
),

copies as (
    select avg(copy_gbs order by src_gpu, dst_gpu) as copy_gbs
    from node_p2p
    where node_id = $node_id
      and src_gpu in (select gpu_index from members)
      and dst_gpu in (select gpu_index from members)
),

final as (
    select
        100.0 * peak.busbw_gbs / copies.copy_gbs as value,
        '%' as unit,
        cast(null as varchar) as run_id,
        peak.source_file,
        peak.source_line
    from peak, copies
)

select * from final

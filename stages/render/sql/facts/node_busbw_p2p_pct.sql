-- One group's best all-reduce bus bandwidth as a share of the mean peer-to-peer copy bandwidth
-- between the group's GPUs, percent (node_allreduce_peak.busbw_p2p_pct).
with final as (
    select
        busbw_p2p_pct as value,
        '%' as unit,
        cast(null as varchar) as run_id,
        source_file,
        source_line
    from node_allreduce_peak
    where node_id = $node_id and gpu_group = $gpu_group
)

select * from final

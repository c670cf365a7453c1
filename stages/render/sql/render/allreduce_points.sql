-- All-reduce measurements of one node probe, for the bus bandwidth chart: one line per group.
with sweep as (
    select *
    from node_allreduce
    where node_id = $node_id
),

final as (
    select
        node_id,
        gpu_group,
        ranks,
        spans_islands,
        message_bytes,
        time_us,
        algbw_gbs,
        busbw_gbs
    from sweep
    order by ranks, gpu_group, message_bytes
)

select * from final

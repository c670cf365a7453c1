-- The all-reduce groups of one node probe with the sizes their sweep covered, largest group last.
with peaks as (
    select *
    from node_allreduce_peak
    where node_id = $node_id
),

final as (
    select
        node_id,
        gpu_group,
        ranks,
        spans_islands,
        message_bytes,
        min_message_bytes,
        max_message_bytes,
        all_correct
    from peaks
    order by ranks, gpu_group
)

select * from final

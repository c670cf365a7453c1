-- The message sizes of one group's all-reduce sweep, smallest first.
with sweep as (
    select *
    from node_allreduce
    where node_id = $node_id and gpu_group = $gpu_group
),

final as (
    select
        node_id,
        gpu_group,
        message_bytes
    from sweep
    order by message_bytes
)

select * from final

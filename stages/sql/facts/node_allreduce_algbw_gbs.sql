-- All-reduce algbw_gbs of one GPU group of a probed node at one message size.
with measurement as (
    select *
    from node_allreduce
    where node_id = $node_id and gpu_group = $gpu_group and message_bytes = $message_bytes
),

final as (
    select
        algbw_gbs as value,
        'GB/s' as unit,
        cast(null as varchar) as run_id,
        source_file,
        source_line
    from measurement
)

select * from final

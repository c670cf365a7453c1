-- Message size at which one GPU group reached its best bus bandwidth: bytes, printed in binary units.
with peak as (
    select *
    from node_allreduce_peak
    where node_id = $node_id and gpu_group = $gpu_group
),

final as (
    select
        message_bytes as value,
        case
            when message_bytes >= 1073741824 and message_bytes % 1073741824 = 0
                then (message_bytes // 1073741824)::varchar || ' GiB'
            when message_bytes >= 1048576 and message_bytes % 1048576 = 0
                then (message_bytes // 1048576)::varchar || ' MiB'
            when message_bytes >= 1024 and message_bytes % 1024 = 0
                then (message_bytes // 1024)::varchar || ' KiB'
            else message_bytes::varchar || ' B'
        end as display,
        cast(null as varchar) as unit,  -- the display carries the unit
        cast(null as varchar) as run_id,
        source_file,
        source_line
    from peak
)

select * from final

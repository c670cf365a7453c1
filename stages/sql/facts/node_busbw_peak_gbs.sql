-- Best all-reduce bus bandwidth of one GPU group of a probed node over its sweep, GB/s.
with peak as (
    select *
    from node_allreduce_peak
    where node_id = $node_id and gpu_group = $gpu_group
),

final as (
    select
        busbw_gbs as value,
        'GB/s' as unit,
        cast(null as varchar) as run_id,
        source_file,
        source_line
    from peak
)

select * from final

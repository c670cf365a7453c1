-- Power limit of one GPU in watts.
with gpu as (
    select *
    from node_gpus
    where node_id = $node_id and gpu_index = $gpu_index
),

final as (
    select
        power_limit_w as value,
        'W' as unit,
        cast(null as varchar) as run_id,
        source_file,
        source_line
    from gpu
)

select * from final

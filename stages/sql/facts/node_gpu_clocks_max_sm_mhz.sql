-- Maximum SM clock of one GPU in MHz.
with gpu as (
    select *
    from node_gpus
    where node_id = $node_id and gpu_index = $gpu_index
),

final as (
    select
        clocks_max_sm_mhz as value,
        'MHz' as unit,
        cast(null as varchar) as run_id,
        source_file,
        source_line
    from gpu
)

select * from final

-- GPUs nvidia-smi listed on a probed node (the last GPU line of gpus.csv as evidence).
with gpus as (
    select *
    from node_gpus
    where node_id = $node_id
),

final as (
    select
        count(*) as value,
        'GPUs' as unit,
        cast(null as varchar) as run_id,
        max(source_file) as source_file,
        max(source_line) as source_line
    from gpus
)

select * from final

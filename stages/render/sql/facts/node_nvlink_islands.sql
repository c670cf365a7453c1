-- NVLink islands of a probed node: groups of GPUs joined by NVLink (the topology matrix as evidence).
with node as (
    select *
    from nodes
    where node_id = $node_id
),

matrix as (
    select min(source_file) as source_file, min(source_line) as source_line
    from node_topology
    where node_id = $node_id
),

final as (
    select
        node.nvlink_islands as value,
        'islands' as unit,
        cast(null as varchar) as run_id,
        matrix.source_file,
        matrix.source_line
    from node, matrix
)

select * from final

-- env.json: the NCCL_*, CUDA_* and multicast variables each node probe ran with.
with source as (
    select * from raw.raw_node_env_vars
),

final as (
    select
        node_id::varchar              as node_id,
        name::varchar                 as name,
        value::varchar                as value,
        forced::boolean               as forced,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

-- p2p.jsonl: peer access and copy bandwidth of each ordered GPU pair.
with source as (
    select * from raw.raw_node_p2p
),

final as (
    select
        node_id::varchar              as node_id,
        src::integer                  as src_gpu,
        dst::integer                  as dst_gpu,
        can_access_peer::boolean      as can_access_peer,
        bytes::bigint                 as copy_bytes,
        repeats::integer              as repeats,
        time_us_median::double        as time_us_median,
        copy_gbs::double              as copy_gbs,
        copy_gbs_max::double          as copy_gbs_max,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

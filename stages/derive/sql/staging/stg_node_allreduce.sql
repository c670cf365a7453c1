-- allreduce.jsonl: one all-reduce measurement per GPU group and message size.
with source as (
    select * from raw.raw_node_allreduce
),

final as (
    select
        node_id::varchar              as node_id,
        group_label::varchar          as gpu_group,
        gpus::varchar                 as gpus,
        ranks::integer                as ranks,
        backend::varchar              as backend,
        device::varchar               as device,
        dtype::varchar                as dtype,
        bytes::bigint                 as message_bytes,
        count::bigint                 as elements,
        iters::integer                as iters,
        warmup::integer               as warmup,
        time_us::double               as time_us,
        time_us_min::double           as time_us_min,
        time_us_max::double           as time_us_max,
        algbw_gbs::double             as algbw_gbs,
        busbw_gbs::double             as busbw_gbs,
        correct::boolean              as correct,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

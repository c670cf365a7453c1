-- One row per sample line of a GPU sampler file: one GPU at one time, as nvidia-smi printed it.
with source as (
    select * from raw.raw_gpu_samples
),

final as (
    select
        run_id::varchar               as run_id,
        point_id::varchar             as point_id,
        gpu_index::integer            as gpu_index,
        sampled_at::timestamptz       as sampled_at,
        power_w::double               as power_w,
        utilization_gpu_pct::double   as utilization_gpu_pct,
        memory_used_mib::double       as memory_used_mib,
        clock_sm_mhz::double          as clock_sm_mhz,
        throttle_reasons::varchar     as throttle_reasons,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

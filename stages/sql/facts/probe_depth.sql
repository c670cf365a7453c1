-- Depth at which the needle was planted, as a share of the prompt.
with source as (
    select *
    from gate_probes
    where run_id = $run_id and probe_idx = $probe_idx
),

final as (
    select
        depth as value,
        cast(null as varchar) as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

-- One row per needle probe of a run's quality gate.
with probes as (
    select * from stg_gate_probes
),

final as (
    select
        run_id,
        probe_idx,
        depth,
        prompt_tokens,
        ok,
        latency_s,
        answer,
        failure,
        reasoning_tokens,
        source_file,
        source_line
    from probes
)

select * from final

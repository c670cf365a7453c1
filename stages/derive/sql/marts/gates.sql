-- One row per quality gate of a run: the GATE line's score beside its probes.
-- A run whose probes were written but whose GATE line is missing gets a niah row with no score.
-- provisional: the score is below $gate_min_score, or there is no score.
-- A failed probe (a timeout, an error: no answer to judge) counts as missed; failed_probes counts them.
with gate_lines as (
    select * from stg_gates
    qualify row_number() over (partition by run_id, gate order by source_file desc, source_line desc) = 1
),

probe_counts as (
    select
        run_id,
        count(*)                            as probes,
        count(*) filter (where ok)          as passed_probes,
        count(*) filter (where failure is not null) as failed_probes,
        min(source_file)                    as source_file,
        min(source_line)                    as source_line
    from stg_gate_probes
    group by run_id
),

with_score as (
    select
        gate_lines.run_id,
        gate_lines.gate,
        gate_lines.score,
        coalesce(probe_counts.probes, 0)        as probes,
        coalesce(probe_counts.passed_probes, 0) as passed_probes,
        coalesce(probe_counts.failed_probes, 0) as failed_probes,
        gate_lines.source_file,
        gate_lines.source_line
    from gate_lines
    left join probe_counts on probe_counts.run_id = gate_lines.run_id and gate_lines.gate = 'niah'
),

without_score as (
    select
        probe_counts.run_id,
        'niah'                      as gate,
        null::double                as score,
        probe_counts.probes,
        probe_counts.passed_probes,
        probe_counts.failed_probes,
        probe_counts.source_file,
        probe_counts.source_line
    from probe_counts
    anti join gate_lines on gate_lines.run_id = probe_counts.run_id and gate_lines.gate = 'niah'
),

unioned as (
    select * from with_score
    union all
    select * from without_score
),

final as (
    select
        run_id,
        gate,
        score,
        probes::integer                                     as probes,
        passed_probes::integer                              as passed_probes,
        failed_probes::integer                              as failed_probes,
        coalesce(score < $gate_min_score::double, true)     as provisional,
        source_file,
        source_line
    from unioned
)

select * from final

-- Runs of a profile, every attempt, oldest first, with how their launch ended.
with profile_runs as (
    select
        r.run_id, r.spec_label as spec, r.model, r.layout, r.ctx_label, r.engine, r.attempt, r.is_latest,
        r.started_at, r.tampered, r.tampered_files, r.tampered_rows_kept
    from runs as r
    where r.profile = $profile
),

final as (
    select
        pr.*,
        coalesce(l.status, 'unknown') as status,
        l.error_type,
        l.error_message,
        l.error_source_file,
        coalesce(g.provisional, false) as provisional,
        g.run_id is not null as gated
    from profile_runs as pr
    left join launches as l on l.run_id = pr.run_id
    left join gates as g on g.run_id = pr.run_id and g.gate = 'niah'
    order by pr.started_at, pr.run_id
)

select * from final

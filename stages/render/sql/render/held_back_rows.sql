-- Rows derive held back from the public tables (quarantine): those of the runs $run_ids or of the
-- node probes $node_ids, or every one when both are null. One row per held-back row and reason.
with held as (
    select * from quarantine
    where ($run_ids::varchar[] is null and $node_ids::varchar[] is null)
       or list_contains($run_ids::varchar[], run_id)
       or list_contains($node_ids::varchar[], node_id)
),

final as (
    select
        table_name,
        row_key,
        coalesce(source_file || coalesce(', line ' || source_line, ''), 'no file') as source,
        reason
    from held
    order by table_name, row_key, reason
)

select * from final

-- One row per value of a run without meta.json that was read from another of its files instead
-- (stages/ingest/infer.py): the image and engine version, the GPU set and count, the server's
-- maximum context. Each names how it was read and the file and line it came from, for the audit
-- entries of the numbers that rest on it (a throughput per GPU divides by the inferred count).
with inferred as (
    select * from stg_run_inferred
),

final as (
    select
        run_id,
        field,
        value,
        how,
        source_file,
        source_line
    from inferred
    order by run_id, field
)

select * from final

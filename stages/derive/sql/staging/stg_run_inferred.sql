-- Values of a run that has no meta.json, read from another of its files (stages/ingest/infer.py):
-- one row per value, with how it was read and its file and line.
with source as (
    select * from raw.raw_run_inferred
),

final as (
    select
        run_id::varchar         as run_id,
        field::varchar          as field,
        value::varchar          as value,
        how::varchar            as how,
        source_file::varchar    as source_file,
        source_line::integer    as source_line
    from source
)

select * from final

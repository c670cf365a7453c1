-- GATE lines of niah.log.
with source as (
    select * from raw.raw_gates
),

final as (
    select
        run_id::varchar               as run_id,
        gate::varchar                 as gate,
        score::double                 as score,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

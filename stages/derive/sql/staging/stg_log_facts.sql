-- Single facts read from the engine logs.
with source as (
    select * from raw.raw_log_facts
),

final as (
    select
        run_id::varchar               as run_id,
        fact::varchar                 as fact,
        value_num::double             as value_num,
        value_text::varchar           as value_text,
        detail::varchar               as detail,
        worker::varchar               as worker,
        log_time::varchar             as log_time,
        excerpt::varchar              as excerpt,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

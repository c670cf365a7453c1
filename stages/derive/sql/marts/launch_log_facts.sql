-- One row per startup fact an engine logged before it was ready (or before it died): the KV pool,
-- its memory, the weights' memory and load time, the engine's own concurrency estimate, the
-- kernels and backends it chose. The first line of each fact per run; each row cites its line.
with facts as (
    select * from stg_log_facts
    where fact not in ('error', 'ready')
    qualify row_number() over (partition by run_id, fact order by source_file, source_line) = 1
),

final as (
    select
        run_id,
        fact,
        value_num,
        value_text,
        detail,
        source_file,
        source_line
    from facts
    order by run_id, source_line, fact
)

select * from final

-- The server's maximum context in tokens.
with source as (
    select *
    from launches
    where run_id = $run_id
),

final as (
    select
        max_model_len as value,
        'tokens' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

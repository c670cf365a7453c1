-- Seconds from engine start until it answered /health (launch.out ready_s).
with source as (
    select *
    from launches
    where run_id = $run_id
),

final as (
    select
        ready_s as value,
        's' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

-- Requests of a benchmark point left out of a statistic for one reason (invalid_rows).
with left_out as (
    select run_id, request_idx
    from invalid_rows
    where run_id = $run_id and point_id = $point_id and reason = $reason
),

final as (
    select
        count(distinct request_idx) as value,
        'requests' as unit,
        $run_id as run_id,
        'Counted over the rows of invalid_rows for the point and reason.' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from left_out
)

select * from final

-- Requests of a benchmark point that invalid_rows lists for one reason, each once (a request can
-- have several reasons, one row each). Not all are left out of a figure: which figures a reason
-- keeps its requests out of is invalid_rows.excludes_ttft and excludes_tpot.
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
        'Counted over the rows of invalid_rows for the point and reason, each request once.' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from left_out
)

select * from final

-- Output tokens/s per GPU that a setup's Pareto frontier gives for a workload at the compared
-- decode speed per user (pareto_compare): interpolated along a straight line between the frontier
-- point just at or below that speed and the one just at or above it; null where the frontier does
-- not bracket it. The note names both points with their figures.
with compared as (
    select *
    from pareto_compare
    where setup = $setup and workload = $workload
),

final as (
    select
        output_tok_s_per_gpu as value,
        'tok/s per GPU' as unit,
        list_distinct([lower_run_id, upper_run_id]) as run_id,
        case
            when bracketed then printf(
                'Interpolated at %.6g tok/s per user between %s of %s (%.6g tok/s per user, %.6g tok/s per GPU) '
                || 'and %s of %s (%.6g tok/s per user, %.6g tok/s per GPU), the frontier points that bracket it.',
                compare_user_tok_s, lower_point_id, lower_run_id, lower_decode_tok_s_per_user,
                lower_output_tok_s_per_gpu, upper_point_id, upper_run_id, upper_decode_tok_s_per_user,
                upper_output_tok_s_per_gpu)
            else printf('Not bracketed at %.6g tok/s per user: the frontier runs from %.6g to %.6g tok/s per user.',
                        compare_user_tok_s, frontier_min_decode_tok_s_per_user, frontier_max_decode_tok_s_per_user)
        end as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from compared
)

select * from final

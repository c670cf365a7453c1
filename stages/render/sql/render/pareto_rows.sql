-- The Pareto chart's rows: the points of pareto_points among the runs $run_ids for one workload,
-- each with the decode speed per user the setups are compared at for the workload (params.yaml,
-- via pareto_compare).
with speed as (
    select max(compare_user_tok_s) as compare_user_tok_s
    from pareto_compare
    where workload = $workload
),

final as (
    select p.*, speed.compare_user_tok_s
    from pareto_points as p
    cross join speed
    where list_contains($run_ids, p.run_id) and p.workload = $workload
    order by p.setup, p.decode_tok_s_per_user, p.point_id
)

select * from final

-- The frontier points a figure read off a setup's Pareto frontier rests on, for
-- stages/render/marks.py: for each setup and workload of pareto_compare, the two points the
-- figure at the compared speed is interpolated between (role 'at_speed'; none where the frontier
-- does not bracket it), and the frontier's slowest and fastest points per user (roles 'slowest',
-- 'fastest': the frontier's range).
with frontier as (
    select
        setup,
        workload,
        run_id,
        point_id,
        row_number() over (partition by setup, workload
                           order by decode_tok_s_per_user, run_id, point_id)      as from_slowest,
        row_number() over (partition by setup, workload
                           order by decode_tok_s_per_user desc, run_id, point_id) as from_fastest
    from pareto_points
    where on_frontier
),

bracket as (
    select setup, workload, 'at_speed' as role, lower_run_id as run_id, lower_point_id as point_id
    from pareto_compare
    where bracketed
    union all
    select setup, workload, 'at_speed' as role, upper_run_id as run_id, upper_point_id as point_id
    from pareto_compare
    where bracketed
),

final as (
    select * from bracket
    union all
    select setup, workload, 'slowest' as role, run_id, point_id from frontier where from_slowest = 1
    union all
    select setup, workload, 'fastest' as role, run_id, point_id from frontier where from_fastest = 1
)

select * from final
order by setup, workload, role, run_id, point_id

-- The service level objectives each benchmark point is judged by: its workload's in params.yaml
-- `slo`, the run's own profile's (int_run_params picks them). A point whose workload has none has
-- no row. ttft_target_s and tpot_target_ms are null where the workload sets no such target.
with final as (
    select
        points.run_id,
        points.point_id,
        slo.percentile,
        slo.ttft_s                                      as ttft_target_s,
        slo.tpot_ms                                     as tpot_target_ms
    from bench_points as points
    left join int_run_params as run_params
        on run_params.run_id = points.run_id
    inner join param_slo as slo
        on slo.profile is not distinct from run_params.params_profile
       and slo.workload = points.workload
)

select * from final

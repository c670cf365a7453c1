-- One row per setup and workload of pareto_points: the output tokens/s per GPU its Pareto frontier
-- gives at the decode speed per user that params.yaml names for the workload
-- (pareto.workloads.<workload>, else pareto.compare_user_tok_s).
-- Along the frontier, ordered by decode speed, the figure is read by straight-line interpolation
-- between the frontier point just below that speed (lower_*) and the one just above it (upper_*),
-- both measured; at a point measured at exactly that speed, that point's figure. Only where the
-- frontier brackets the speed: bracketed is false, and the figure null, where the frontier's
-- fastest point per user is slower than it (reach 'below') or its slowest faster ('above').
with frontier as (
    select * from pareto_points where on_frontier
),

speed as (
    select
        w.workload,
        coalesce(named.compare_user_tok_s, fallback.compare_user_tok_s) as s,
        case
            when named.compare_user_tok_s is not null then 'pareto.workloads.' || w.workload
            else 'pareto.compare_user_tok_s'
        end                                                         as setting
    from (select distinct workload from frontier) as w
    left join param_pareto as named on named.workload = w.workload
    left join param_pareto as fallback on fallback.workload is null
),

setups as (
    select
        setup,
        workload,
        any_value(model)                            as model,
        any_value(layout)                           as layout,
        any_value(engine)                           as engine,
        any_value(image)                            as image,
        max(gpus)                                   as gpus,
        count(*)                                    as frontier_points,
        min(decode_tok_s_per_user)                  as frontier_min_decode_tok_s_per_user,
        max(decode_tok_s_per_user)                  as frontier_max_decode_tok_s_per_user
    from frontier
    group by setup, workload
),

nearest as (
    -- the frontier point just below the speed (side 'lower') and the one just above it ('upper')
    select f.*, sides.side
    from frontier as f
    join speed on speed.workload = f.workload
    cross join (values ('lower'), ('upper')) as sides(side)
    where (sides.side = 'lower' and f.decode_tok_s_per_user <= speed.s)
       or (sides.side = 'upper' and f.decode_tok_s_per_user >= speed.s)
    qualify row_number() over (
        partition by f.setup, f.workload, sides.side
        order by case when sides.side = 'lower' then -f.decode_tok_s_per_user
                      else f.decode_tok_s_per_user end
    ) = 1
),

final as (
    select
        setups.setup,
        setups.workload,
        setups.model,
        setups.layout,
        setups.engine,
        setups.image,
        setups.gpus::integer                                        as gpus,
        speed.s::double                                             as compare_user_tok_s,
        speed.setting                                               as compare_user_tok_s_setting,
        setups.frontier_points::integer                             as frontier_points,
        setups.frontier_min_decode_tok_s_per_user::double           as frontier_min_decode_tok_s_per_user,
        setups.frontier_max_decode_tok_s_per_user::double           as frontier_max_decode_tok_s_per_user,
        coalesce(lo.run_id is not null and hi.run_id is not null, false) as bracketed,
        case
            when speed.s is null then null
            when lo.run_id is null then 'above'
            when hi.run_id is null then 'below'
            else 'bracketed'
        end                                                         as reach,
        case
            when lo.run_id is null or hi.run_id is null then null
            when hi.decode_tok_s_per_user = lo.decode_tok_s_per_user then lo.output_tok_s_per_gpu
            else lo.output_tok_s_per_gpu
                 + (hi.output_tok_s_per_gpu - lo.output_tok_s_per_gpu)
                   * (speed.s - lo.decode_tok_s_per_user)
                   / (hi.decode_tok_s_per_user - lo.decode_tok_s_per_user)
        end::double                                                 as output_tok_s_per_gpu,
        lo.run_id                                                   as lower_run_id,
        lo.point_id                                                 as lower_point_id,
        lo.decode_tok_s_per_user::double                            as lower_decode_tok_s_per_user,
        lo.output_tok_s_per_gpu::double                             as lower_output_tok_s_per_gpu,
        hi.run_id                                                   as upper_run_id,
        hi.point_id                                                 as upper_point_id,
        hi.decode_tok_s_per_user::double                            as upper_decode_tok_s_per_user,
        hi.output_tok_s_per_gpu::double                             as upper_output_tok_s_per_gpu,
        coalesce(lo.source_file, hi.source_file)                    as source_file,
        coalesce(lo.source_line, hi.source_line)                    as source_line,
        hi.source_file                                              as upper_file,
        hi.source_line                                              as upper_line
    from setups
    join speed on speed.workload = setups.workload
    left join nearest as lo
        on lo.setup = setups.setup and lo.workload = setups.workload and lo.side = 'lower'
    left join nearest as hi
        on hi.setup = setups.setup and hi.workload = setups.workload and hi.side = 'upper'
)

select * from final

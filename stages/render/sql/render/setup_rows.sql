-- The setups of the Part's runs ($run_ids) that have points on a known GPU set: model, layout,
-- engine and image, with the GPU set and the run of their first point.
with final as (
    select
        setup,
        any_value(model)                            as model,
        any_value(layout)                           as layout,
        any_value(engine)                           as engine,
        coalesce(any_value(image), 'local')         as image,
        string_agg(distinct gpu_set, ' / ')         as gpu_set,
        min(run_id)                                 as run_id,
        arg_min(point_id, run_id || point_id)       as point_id
    from pareto_points
    where list_contains($run_ids::varchar[], run_id)
    group by setup
    order by setup
)

select * from final

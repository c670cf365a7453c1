-- The benchmark points of the Part's runs ($run_ids) whose GPU samples do not cover them
-- (point_energy, energy_valid false): no energy is counted, and energy_problem says why.
-- `spec` is the run's name on the pages (runs.spec_label); sample_file the samples' file within
-- the run's folder (source_file from the run folder on).
with final as (
    select pareto_points.run_id, runs.spec_label as spec, pareto_points.point_id,
           pareto_points.workload, pareto_points.concurrency, pareto_points.setup,
           point_energy.energy_problem, point_energy.source_file,
           coalesce(nullif(split_part(point_energy.source_file, '/' || pareto_points.run_id || '/', 2), ''),
                    point_energy.source_file) as sample_file
    from pareto_points
    inner join runs on runs.run_id = pareto_points.run_id
    inner join point_energy
        on point_energy.run_id = pareto_points.run_id and point_energy.point_id = pareto_points.point_id
    where list_contains($run_ids::varchar[], pareto_points.run_id)
      and pareto_points.repeat = 1 and not point_energy.energy_valid
    order by pareto_points.workload, pareto_points.setup, pareto_points.concurrency, pareto_points.point_id
)

select * from final

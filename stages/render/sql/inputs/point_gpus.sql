-- The GPUs of a benchmark point's set (its first repeat, as the point's other facts), each with
-- the two figures the point's energy facts take from it (point_gpu_energy): its mean power inside
-- the point's window, used where it has samples there, and its energy over the window, used only
-- where the point's energy is valid (else none is, and the point has no energy). The path is the
-- GPU's sample lines in the sampler file. `reason`: why its energy is not valid.
with point as (
    select run_id, point_id, energy_valid
    from point_energy
    where run_id = $run_id and workload = $workload and concurrency = $concurrency and repeat = 1
),

final as (
    select
        gpus.source_file,
        gpus.avg_power_w                                               as power_value,
        lines.path                                                     as power_path,
        gpus.avg_power_w is not null                                   as power_used,
        gpus.energy_j                                                  as energy_value,
        lines.path                                                     as energy_path,
        point.energy_valid                                             as energy_used,
        gpus.problem                                                   as reason
    from point
    join point_gpu_energy as gpus
        on gpus.run_id = point.run_id and gpus.point_id = point.point_id
    cross join lateral (
        select case
            when gpus.source_line is null then printf('GPU %d: no sample line', gpus.gpu_index)
            else printf('GPU %d: lines %d to %d', gpus.gpu_index, gpus.source_line, gpus.last_sample_line)
        end as path
    ) as lines
    order by gpus.gpu_index
)

select * from final

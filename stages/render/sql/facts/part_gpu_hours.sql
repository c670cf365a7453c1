-- GPU-hours a set of runs held (a Part's run set, $run_ids): the sum over those of its runs that
-- run_timeline times of their GPUs times their wall time (run_phases.gpu_hours, the same on each
-- of a run's rows).
with held as (
    select distinct run_id, gpu_hours
    from run_phases
    where list_contains($run_ids::varchar[], run_id) and gpu_hours is not null
),

final as (
    select
        sum(gpu_hours) as value,
        'GPU-hours' as unit,
        list(run_id order by run_id) as run_id,
        'Summed over the runs: each run''s GPUs (runs.gpu_count) times its wall time, launch to finish (run_phases.gpu_hours).' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from held
)

select * from final

-- Where a run's time went, by kind of phase: one row per run and phase of run_timeline (engine_start,
-- gate, client_prep, requests, tail, step, gap, end), its seconds summed over the run's steps.
-- share_pct: of the run's wall time (run_s: the first phase's start to the last's end).
-- gpu_count: the run's GPUs (runs.gpu_count); gpu_hours = gpu_count * run_s / 3600, the GPU time
-- the run held, the same on each of its rows. estimated: any of the phase's rows estimated (see
-- run_timeline).
with timeline as (
    select * from run_timeline
),

walls as (
    select run_id, (epoch_ms(max(end_at)) - epoch_ms(min(start_at))) / 1000.0 as run_s
    from timeline
    group by run_id
),

gpus as (
    select run_id, gpu_count from runs
),

final as (
    select
        timeline.run_id,
        timeline.phase,
        min(timeline.phase_order)                               as first_order,
        count(*)::integer                                       as phases,
        sum(timeline.seconds)                                   as seconds,
        case when walls.run_s > 0 then 100.0 * sum(timeline.seconds) / walls.run_s end as share_pct,
        walls.run_s,
        gpus.gpu_count,
        gpus.gpu_count * walls.run_s / 3600.0                   as gpu_hours,
        bool_or(timeline.estimated)                             as estimated
    from timeline
    join walls on walls.run_id = timeline.run_id
    left join gpus on gpus.run_id = timeline.run_id
    group by timeline.run_id, timeline.phase, walls.run_s, gpus.gpu_count
    order by timeline.run_id, first_order
)

select * from final

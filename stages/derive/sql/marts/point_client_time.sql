-- The benchmark client's own time per point: one row per benchmark point whose step run_timeline
-- times. step_s: the step, start to end; client_prep_s: its start until the first request was
-- sent (the client building prompts and starting up); requests_s: the requests window; tail_s:
-- the last answer until the step's end; client_s = step_s - requests_s, the time the engine had
-- nothing of the point to do; client_share_pct = client_s / step_s * 100.
-- client_paced: client_share_pct above $client_pace_max_pct (params.yaml rules): the client, not
-- the engine, set the point's pace (its GPUs waited on it). Null where the rule is not set or the
-- client did not time the point's requests.
-- estimated: the times come from the point's GPU sampler file (a run written before launch.out
-- had step_times lines; the sampler's window stands for the step's), not from step_times.
with timeline as (
    select * from run_timeline where step is not null
),

per_step as (
    select
        run_id,
        step                                                        as point_id,
        (epoch_ms(max(end_at)) - epoch_ms(min(start_at))) / 1000.0  as step_s,
        sum(seconds) filter (where phase = 'client_prep')           as client_prep_s,
        sum(seconds) filter (where phase = 'requests')              as requests_s,
        sum(seconds) filter (where phase = 'tail')                  as tail_s,
        max(prompts_waited_s)                                       as prompts_waited_s,
        bool_or(estimated)                                          as estimated,
        min(source_file)                                            as source_file,
        min(source_line)                                            as source_line
    from timeline
    group by run_id, step
),

shares as (
    select
        *,
        step_s - requests_s                                         as client_s,
        case when step_s > 0 then 100.0 * (1 - requests_s / step_s) end as client_share_pct
    from per_step
),

final as (
    select
        points.run_id,
        points.point_id,
        points.workload,
        points.concurrency,
        points.repeat,
        shares.step_s,
        shares.client_prep_s,
        shares.requests_s,
        shares.tail_s,
        shares.client_s,
        shares.client_share_pct,
        shares.prompts_waited_s,
        shares.client_share_pct > $client_pace_max_pct::double      as client_paced,
        $client_pace_max_pct::double                                as client_pace_max_pct,
        shares.estimated,
        shares.source_file,
        shares.source_line
    from stg_bench_points as points
    join shares on shares.run_id = points.run_id and shares.point_id = points.point_id
    order by points.run_id, points.point_id
)

select * from final

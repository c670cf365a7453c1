-- One row per benchmark point of a reported attempt (runs.is_current), not a public table: the
-- point with its run's setup and GPUs, what pareto_points places and pareto_left_out says why not.
-- Its columns are pareto_points' (their description there), with `completed`, and
-- `left_out_reason`: why the point has no place (pareto_left_out lists the reasons), null where it
-- is placed. The one rule both tables read, so a point is in exactly one of them.
with runs_with_gpus as (
    select
        r.run_id,
        r.model,
        r.layout,
        r.engine,
        r.image,
        r.spec,
        r.profile,
        r.gpus                                                      as gpu_set,
        r.gpu_count                                                 as gpus,
        coalesce(i.how, 'meta.json')                                as gpus_from,
        i.source_file                                               as gpus_source_file,
        i.source_line                                               as gpus_source_line,
        case when i.how is not null then
            'The GPU count was inferred (the run has no meta.json): ' || i.how || ', '
            || i.source_file || ' line ' || i.source_line || '.'
        end                                                         as gpus_note
    from runs as r
    left join run_inferred as i on i.run_id = r.run_id and i.field = 'gpu_count'
    where r.is_current
),

candidates as (
    select
        p.run_id,
        p.point_id,
        p.workload,
        p.concurrency,
        p.repeat::integer                                           as repeat,
        r.spec,
        r.profile,
        r.model,
        r.layout,
        r.engine,
        r.image,
        concat_ws(' | ', r.model, r.layout, r.engine, coalesce(r.image, 'local')) as setup,
        r.gpu_set,
        r.gpus::integer                                             as gpus,
        r.gpus_from,
        r.gpus_source_file,
        r.gpus_source_line::integer                                 as gpus_source_line,
        r.gpus_note,
        p.completed,
        p.output_tok_s::double                                      as output_tok_s,
        p.tpot_median_ms::double                                    as tpot_median_ms,
        p.decode_tok_s_per_user::double                             as decode_tok_s_per_user,
        p.capacity_limited,
        p.provisional,
        p.source_file,
        p.source_line,
        p.concurrency_line
    from bench_points as p
    inner join runs_with_gpus as r on r.run_id = p.run_id
),

final as (
    select
        *,
        case
            when coalesce(gpus, 0) = 0 then 'no GPU set'
            when workload is null then 'no workload'
            when completed = 0 then 'no request completed'
            when not coalesce(decode_tok_s_per_user > 0, false) then 'no decode speed'
            when not coalesce(output_tok_s > 0, false) then 'no output throughput'
        end                                                         as left_out_reason
    from candidates
)

select * from final

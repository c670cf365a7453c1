-- One row per benchmark point of a reported attempt (runs.is_current) whose run says how many GPUs
-- it took (runs.gpu_count: meta.json's GPU set counted, or read from a folder without one): the
-- point placed for the Pareto frontier of its setup. A repeat of a point is a point of its own.
-- gpus: runs.gpu_count; gpu_set: runs.gpus (null where only the count is known).
-- gpus_from: 'meta.json', or how the count was read from the run's other files (run_inferred),
--   whose line gpus_source_file and gpus_source_line name (null for meta.json: no one line of it
--   holds the count);
--   gpus_note says so in a sentence for the audit entries, null for meta.json.
-- setup: model, layout, engine and image joined by ' | ' (the image 'local' for a local engine):
--   what a frontier is drawn for. Two runs of one setup share its frontier.
-- output_tok_s_per_gpu: the point's output tokens/s (all users) divided by gpus.
-- on_frontier: no other point of the same setup and workload is at least as fast per user and
--   gives at least as many output tokens/s per GPU, and better in one of the two. A point without
--   a decode speed or a throughput, or whose requests all failed, has no place (pareto_left_out).
with points as (
    select *, output_tok_s / gpus                                   as output_tok_s_per_gpu
    from int_pareto_candidates
    where left_out_reason is null          -- pareto_left_out lists the others, with the reason
),

dominated as (
    select distinct a.run_id, a.point_id
    from points as a
    inner join points as b
        on b.setup = a.setup
       and b.workload = a.workload
       and b.decode_tok_s_per_user >= a.decode_tok_s_per_user
       and b.output_tok_s_per_gpu >= a.output_tok_s_per_gpu
       and (b.decode_tok_s_per_user > a.decode_tok_s_per_user
            or b.output_tok_s_per_gpu > a.output_tok_s_per_gpu)
),

final as (
    select
        points.run_id,
        points.point_id,
        points.workload,
        points.concurrency,
        points.repeat,
        points.spec,
        points.profile,
        points.model,
        points.layout,
        points.engine,
        points.image,
        points.setup,
        points.gpu_set,
        points.gpus,
        points.output_tok_s,
        points.output_tok_s_per_gpu,
        points.tpot_median_ms,
        points.decode_tok_s_per_user,
        dominated.point_id is null                                  as on_frontier,
        points.capacity_limited,
        points.provisional,
        points.source_file,
        points.source_line,
        points.concurrency_line,
        points.gpus_from,
        points.gpus_source_file,
        points.gpus_source_line,
        points.gpus_note
    from points
    left join dominated
        on dominated.run_id = points.run_id and dominated.point_id = points.point_id
)

select * from final

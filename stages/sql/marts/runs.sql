-- One row per run folder. attempt numbers the runs of one spec by start time (1-based);
-- a run without a spec is grouped by model, layout, context and engine instead.
with runs as (
    select * from stg_runs
),

grouped as (
    select
        *,
        coalesce(spec, concat_ws('__', model, layout, ctx_label, engine)) as attempt_group
    from runs
),

numbered as (
    select
        *,
        row_number() over (
            partition by attempt_group
            order by started_at asc nulls first, run_id asc
        ) as attempt,
        count(*) over (partition by attempt_group) as attempts
    from grouped
),

final as (
    select
        run_id,
        spec,
        profile,
        model,
        layout,
        ctx_label,
        engine,
        engine_version,
        image,
        image_digest,
        executor,
        started_at,
        finished_at,
        git_sha,
        attempt::integer        as attempt,
        attempt = attempts      as is_latest,
        recovered,
        source_file,
        source_line
    from numbered
)

select * from final

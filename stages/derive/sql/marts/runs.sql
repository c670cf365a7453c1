-- One row per run folder. attempt_group names what a run is an attempt at: its spec (a run
-- without one: its model, layout, context and engine), its image and its engine version, so that
-- one layout run under two images (or two engine versions) makes two groups, each with its own
-- reported attempt. A run that recorded no engine version (a launch that crashed before logging
-- it) takes the version of the next run of its spec and image that did, else the previous one's.
-- attempt numbers the runs of one group by start time (1-based).
-- run_status is launch.out's last `run_status=` (complete, interrupted, engine_died, failed),
-- 'unknown' when the run never wrote one. is_current marks the attempt the articles report for
-- its group: the latest complete one, else the latest. tampered marks a run whose sealed folder no
-- longer matches its seal (tampered_files names the files); tampered_rows_kept says its rows were
-- read before the change. sealed_by: run (sealed when the run ended, or by `campaign seal`) or
-- ingest (it arrived unsealed and ingest sealed it at sealed_at); null while it has no seal.
-- spec_label names the run where the articles name it: its spec, else its model, layout, context
-- and engine. A run without meta.json has its GPUs, image, engine version and maximum context read
-- from its other files; `inferred` lists which (stg_run_inferred holds the line of each), and
-- imported_* say where `campaign import` brought it from.
with run_rows as (
    select * from stg_runs
),

inferred as (
    select run_id, string_agg(distinct field, ', ' order by field) as inferred
    from stg_run_inferred
    group by run_id
),

seals as (
    select * from stg_seals
),

tampered as (
    select
        run_id,
        string_agg(distinct file, ', ' order by file) as tampered_files,
        bool_and(rows_kept)                           as tampered_rows_kept
    from stg_tampered
    group by run_id
),

run_status as (
    select run_id, lower(launch_value) as run_status
    from stg_launch_out
    where launch_key = 'run_status'
    qualify row_number() over (partition by run_id order by source_line desc) = 1
),

keyed as (
    select
        *,
        coalesce(spec, concat_ws('__', model, layout, ctx_label, engine)) as spec_group
    from run_rows
),

versioned as (
    select
        *,
        coalesce(
            engine_version,
            first_value(engine_version ignore nulls) over (
                partition by spec_group, image
                order by started_at asc nulls first, run_id asc
                rows between current row and unbounded following),
            last_value(engine_version ignore nulls) over (
                partition by spec_group, image
                order by started_at asc nulls first, run_id asc
                rows between unbounded preceding and current row)
        ) as group_version
    from keyed
),

grouped as (
    select
        * exclude (spec_group, group_version),
        concat_ws(' | ', spec_group, coalesce(image, 'no image'),
                  coalesce(group_version, 'unknown version')) as attempt_group
    from versioned
),

numbered as (
    select
        grouped.*,
        coalesce(run_status.run_status, 'unknown') as run_status,
        row_number() over (
            partition by attempt_group
            order by grouped.started_at asc nulls first, grouped.run_id asc
        ) as attempt,
        count(*) over (partition by attempt_group) as attempts,
        row_number() over (
            partition by attempt_group
            order by (coalesce(run_status.run_status, '') = 'complete') desc,
                     grouped.started_at desc nulls last, grouped.run_id desc
        ) as report_rank
    from grouped
    left join run_status on run_status.run_id = grouped.run_id
),

marked as (
    select
        numbered.*,
        tampered.run_id is not null                  as tampered,
        tampered.tampered_files,
        tampered.tampered_rows_kept,
        seals.sealed_by,
        seals.sealed_at,
        inferred.inferred
    from numbered
    left join tampered on tampered.run_id = numbered.run_id
    left join seals on seals.run_id = numbered.run_id
    left join inferred on inferred.run_id = numbered.run_id
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
        attempt_group,
        attempt::integer        as attempt,
        attempt = attempts      as is_latest,
        run_status,
        report_rank = 1         as is_current,
        recovered,
        tampered,
        tampered_files,
        tampered_rows_kept,
        sealed_by,
        sealed_at,
        source_file,
        source_line,
        coalesce(spec, concat_ws('__', model, layout, ctx_label, engine)) as spec_label,
        gpus,
        gpu_count,
        inferred,
        imported_from,
        imported_at,
        imported_by,
        imported_kind
    from marked
)

select * from final

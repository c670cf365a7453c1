-- The comparisons a campaign's runs hold without anyone listing them (the Compare page,
-- stages/render/compare_pairs.py): pairs of reported runs (runs.is_current) of one model on one
-- profile, the earlier run the base.
--   images: one setup (runs.spec_label) measured under two engine images: the reported run of
--           each image against that of the image the setup ran under next;
--   rescue: a setup whose reported launch never became ready (failed or interrupted), and the
--           model's next launch on the profile (the order of launch_changes), the reported run of
--           another setup: the relaunch that took its place.
-- In the order the head runs started.
with launched as (
    select
        r.run_id, r.profile, r.model, r.spec_label as setup, r.image, r.started_at, r.is_current,
        l.status as launch_status,
        lead(r.run_id) over (partition by r.profile, r.model order by r.started_at, r.run_id) as next_run_id
    from runs as r
    left join launches as l on l.run_id = r.run_id
),

reported as (
    select
        run_id, setup, image, started_at,
        lag(run_id) over (partition by profile, setup order by started_at, run_id) as earlier_run_id,
        lag(image) over (partition by profile, setup order by started_at, run_id) as earlier_image
    from launched
    where is_current
),

images as (
    select 'images' as kind, earlier_run_id as base_run_id, run_id as head_run_id
    from reported
    where earlier_run_id is not null and earlier_image <> image
),

rescues as (
    select 'rescue' as kind, failed.run_id as base_run_id, next.run_id as head_run_id
    from launched as failed
    inner join launched as next on next.run_id = failed.next_run_id
    where failed.is_current and failed.launch_status in ('failed', 'interrupted')
      and next.is_current and next.setup <> failed.setup
),

pairs as (
    select * from images
    union all
    select * from rescues
),

final as (
    select
        pairs.kind, pairs.base_run_id, pairs.head_run_id, head.model,
        base.spec_label as base_setup, head.spec_label as head_setup,
        base.image as base_image, head.image as head_image
    from pairs
    inner join runs as base on base.run_id = pairs.base_run_id
    inner join runs as head on head.run_id = pairs.head_run_id
    order by head.started_at, head.run_id, pairs.kind
)

select * from final

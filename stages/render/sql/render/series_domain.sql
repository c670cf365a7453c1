-- The series every chart colours by, one per run: its spec as the pages name it (runs.spec_label),
-- with its image's tag beside it where the campaign measured that spec under more than one image
-- (a nightly's commit hash cut to 8 characters; the whole image where two tags would read the
-- same). `slot` places the series in the campaign's palette: series in the order they were first
-- run, so a series keeps its colour on every page and as later runs are added.
with tagged as (
    select
        r.run_id,
        r.spec_label,
        r.started_at,
        coalesce(r.image, '')                                                    as image,
        regexp_replace(regexp_extract(coalesce(r.image, ''), '[^:/]*$'),
                       '([0-9a-f]{8})[0-9a-f]{8,}', '\1')                        as tag
    from runs as r
),

per_spec as (
    select spec_label, count(distinct image) as images, count(distinct tag) as tags
    from tagged
    group by spec_label
),

labelled as (
    select
        t.run_id,
        t.started_at,
        case
            when s.images < 2 then t.spec_label
            when s.tags = s.images and t.tag <> '' then t.spec_label || ' · ' || t.tag
            else t.spec_label || ' · ' || coalesce(nullif(t.image, ''), 'no image')
        end as series
    from tagged as t
    inner join per_spec as s on s.spec_label = t.spec_label
),

firsts as (
    select series, min(started_at) as first_started_at
    from labelled
    group by series
),

final as (
    select
        l.run_id,
        l.series,
        dense_rank() over (order by f.first_started_at nulls last, l.series) - 1 as slot
    from labelled as l
    inner join firsts as f on f.series = l.series
    order by slot, l.run_id
)

select * from final

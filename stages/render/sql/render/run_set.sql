-- The runs of a run set (a Part of the series, a side of a comparison): every attempt whose
-- profile, spec, model and image match what the set names, oldest first; with $current_only,
-- only the attempt reported for each spec (runs.is_current). A null $profile or $image and an
-- empty $specs or $models match any run; $image matches the full name or a bare tag.
with final as (
    select run_id
    from runs
    where ($profile::varchar is null or profile = $profile::varchar)
      and (len($specs::varchar[]) = 0 or list_contains($specs::varchar[], spec))
      and (len($models::varchar[]) = 0 or list_contains($models::varchar[], model))
      and ($image::varchar is null or image = $image::varchar
           or ends_with(image, ':' || $image::varchar))
      and (not $current_only::boolean or is_current)
    order by started_at, run_id
)

select * from final

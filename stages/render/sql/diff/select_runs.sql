-- Runs a comparison side names: the reported attempt (is_current) of every run whose spec is in
-- $specs, or whose image is $image (or ends in ':' || $image, a bare tag).
with final as (
    select run_id
    from runs
    where is_current
      and (spec in (select unnest($specs))
           or image = $image
           or ends_with(image, ':' || $image))
    order by run_id
)

select * from final

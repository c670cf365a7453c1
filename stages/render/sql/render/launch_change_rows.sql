-- What changed from the launch before `run_id` to it (launch_changes), as text.
with final as (
    select
        c.run_id,
        c.change,
        c.name,
        coalesce(c.old_value, case when c.change = 'flag added' then '' else '(set)' end) as old_value,
        coalesce(c.new_value, case when c.change = 'flag removed' then '' else '(set)' end) as new_value
    from launch_changes as c
    where c.run_id = $run_id
    order by c.change = 'image changed' desc, c.name
)

select * from final

-- The models of a set of runs ($run_ids), in the order of their first run: a Part's sections.
with runs_of_set as (
    select model, started_at, run_id
    from runs
    where list_contains($run_ids::varchar[], run_id)
),

final as (
    select model, min(started_at) as first_started_at
    from runs_of_set
    group by model
    order by first_started_at, model
)

select * from final

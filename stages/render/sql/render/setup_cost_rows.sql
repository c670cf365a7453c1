-- The cost rows of one price set for the Part's runs ($run_ids), by workload, setup and users.
with final as (
    select run_id, point_id, workload, concurrency, setup, price_set
    from point_cost
    where list_contains($run_ids::varchar[], run_id) and price_set = $price_set
    order by workload, setup, concurrency, point_id
)

select * from final

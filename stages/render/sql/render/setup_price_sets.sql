-- The price sets of params.yaml (prices) as point_cost holds them, with their sources.
with final as (
    select distinct price_set, price_source
    from point_cost
    order by price_set
)

select * from final

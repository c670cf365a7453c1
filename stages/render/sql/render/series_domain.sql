-- Every run spec of the campaign, in a fixed order: one colour each, on every page.
with specs as (
    select distinct r.spec
    from runs as r
    where r.spec is not null
),

final as (
    select spec
    from specs
    order by spec
)

select * from final

-- Every run spec of the campaign (a run without one by its model, layout, context and engine:
-- runs.spec_label), in a fixed order: one colour each, on every page.
with specs as (
    select distinct r.spec_label as spec
    from runs as r
),

final as (
    select spec
    from specs
    order by spec
)

select * from final

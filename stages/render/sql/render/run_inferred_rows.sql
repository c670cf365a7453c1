-- Every value of a run without meta.json read from its other files instead (run_inferred), for
-- the run's audit page.
with final as (
    select run_id, field, value, how, source_file, source_line
    from run_inferred
    order by run_id, field
)

select * from final

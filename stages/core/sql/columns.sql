-- Column names and types of every table, in table order.
with final as (
    select table_name, column_name, data_type
    from information_schema.columns
    where table_schema = 'main'
    order by table_name, ordinal_position
)

select * from final

-- Dollars per million output tokens of a benchmark point at a price set (point_cost): the GPUs of
-- the run's set times the price per GPU-hour, over the output tokens of an hour at the point's rate.
-- The note names every input.
with cost as (
    select *
    from point_cost
    where run_id = $run_id and point_id = $point_id and price_set = $price_set
),

final as (
    select
        usd_per_million_output_tokens as value,
        'USD per million output tokens' as unit,
        run_id,
        printf('%d GPUs x %.6g USD per GPU-hour (price set %s, source %s) / (%.6g output tok/s x 3600 s) '
               || 'x 1000000; the output rate is output_throughput in %s, line %d.',
               gpus, usd_per_gpu_hour, price_set, price_source, output_tok_s, source_file,
               source_line) || coalesce(' ' || gpus_note, '') as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from cost
)

select * from final

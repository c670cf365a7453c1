-- One row per point of pareto_points and price set of params.yaml (prices): what its output
-- tokens cost at that price. The GPUs of the run's set are paid for the whole hour whether or not
-- they are busy, so a million output tokens cost
--   gpus x usd_per_gpu_hour / (output_tok_s x 3600) x 1,000,000 dollars.
with points as (
    select * from pareto_points
),

final as (
    select
        points.run_id,
        points.point_id,
        points.workload,
        points.concurrency,
        points.setup,
        prices.price_set,
        prices.source                                               as price_source,
        prices.usd_per_gpu_hour::double                             as usd_per_gpu_hour,
        points.gpus,
        points.output_tok_s,
        (points.output_tok_s * 3600.0)::double                      as output_tokens_per_hour,
        (points.gpus * prices.usd_per_gpu_hour * 1000000.0
            / (points.output_tok_s * 3600.0))::double               as usd_per_million_output_tokens,
        points.source_file,
        points.source_line,
        points.gpus_note
    from points
    cross join param_prices as prices
)

select * from final

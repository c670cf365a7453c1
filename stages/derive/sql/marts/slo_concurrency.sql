-- Per launch and workload with service level objectives: the most concurrent users that met
-- them. A concurrency level's share is taken over all its repeats (point_slo: met over judged
-- requests); it meets the objectives when that share is at least the percentile.
-- met_concurrency: the highest measured level that met them. failed_concurrency: the lowest
-- measured level above it (which, being above the highest that met, missed).
-- slo_concurrency: where both exist they bracket the crossing, and it is interpolated linearly in
--   users between them, at the percentile:
--     met + (met_share - percentile) * (failed - met) / (met_share - failed_share)
--   (bracket 'interpolated'); where no level above missed, it is met_concurrency, a measured
--   lower bound (bracket 'highest measured met'); where no level met, null ('none met').
with levels as (
    select
        run_id,
        workload,
        concurrency,
        any_value(percentile)                           as percentile,
        any_value(ttft_target_s)                        as ttft_target_s,
        any_value(tpot_target_ms)                       as tpot_target_ms,
        100.0 * sum(slo_met_requests) / sum(slo_judged_requests) as share_pct,
        max(goodput_req_s)                              as goodput_req_s
    from point_slo
    where slo_judged_requests > 0
    group by run_id, workload, concurrency
),

judged as (
    select *, share_pct >= percentile as met from levels
),

bounds as (
    select
        run_id,
        workload,
        any_value(percentile)                           as percentile,
        any_value(ttft_target_s)                        as ttft_target_s,
        any_value(tpot_target_ms)                       as tpot_target_ms,
        count(*)                                        as levels,
        max(concurrency) filter (where met)             as met_concurrency,
        max(goodput_req_s)                              as goodput_max_req_s
    from judged
    group by run_id, workload
),

bracketed as (
    select
        bounds.*,
        low.share_pct                                   as met_share_pct,
        (select min(above.concurrency) from judged as above
         where above.run_id = bounds.run_id and above.workload = bounds.workload
           and above.concurrency > bounds.met_concurrency) as failed_concurrency
    from bounds
    left join judged as low
        on low.run_id = bounds.run_id and low.workload = bounds.workload
       and low.concurrency = bounds.met_concurrency
),

final as (
    select
        bracketed.run_id,
        bracketed.workload,
        bracketed.percentile::double                    as percentile,
        bracketed.ttft_target_s::double                 as ttft_target_s,
        bracketed.tpot_target_ms::double                as tpot_target_ms,
        bracketed.levels::integer                       as levels,
        bracketed.met_concurrency::integer              as met_concurrency,
        bracketed.met_share_pct::double                 as met_share_pct,
        bracketed.failed_concurrency::integer           as failed_concurrency,
        high.share_pct::double                          as failed_share_pct,
        case
            when bracketed.met_concurrency is null then null
            when bracketed.failed_concurrency is null then bracketed.met_concurrency
            else bracketed.met_concurrency
                 + (bracketed.met_share_pct - bracketed.percentile)
                   * (bracketed.failed_concurrency - bracketed.met_concurrency)
                   / (bracketed.met_share_pct - high.share_pct)
        end::double                                     as slo_concurrency,
        case
            when bracketed.met_concurrency is null then 'none met'
            when bracketed.failed_concurrency is null then 'highest measured met'
            else 'interpolated'
        end                                             as bracket,
        bracketed.goodput_max_req_s::double             as goodput_max_req_s
    from bracketed
    left join judged as high
        on high.run_id = bracketed.run_id and high.workload = bracketed.workload
       and high.concurrency = bracketed.failed_concurrency
)

select * from final

-- One row per benchmark point of a run, its repeats taken together: a workload with repeats runs
-- each point several times (bench_points.repeat), and a page that shows one row per point shows
-- this one. Each figure is the median across the repeats of the repeats' own figure, with the
-- lowest and the highest beside it; a point that ran once has the three equal. first_point_id is
-- the result file of its first repeat (the one the point's per-point facts print).
-- prefill_tok_s: the point's prefill rate, the median over the requests of every repeat that count
-- for the first token (bench_requests.counts_for_ttft) of prompt tokens over time to first token;
-- prefill_requests: how many such requests have one.
with points as (
    select * from bench_points
),

prefill as (
    select
        run_id,
        workload,
        concurrency,
        median(prefill_tok_s)::double                   as prefill_tok_s,
        count(prefill_tok_s)::integer                   as prefill_requests
    from bench_requests
    where counts_for_ttft
    group by run_id, workload, concurrency
),

repeated as (
    select
        run_id,
        workload,
        concurrency,
        count(*)::integer                               as repeats,
        arg_min(point_id, repeat)                       as first_point_id,
        median(ttft_median_s)::double                   as ttft_median_s,
        min(ttft_median_s)::double                      as ttft_median_min_s,
        max(ttft_median_s)::double                      as ttft_median_max_s,
        median(tpot_median_ms)::double                  as tpot_median_ms,
        min(tpot_median_ms)::double                     as tpot_median_min_ms,
        max(tpot_median_ms)::double                     as tpot_median_max_ms,
        median(output_tok_s)::double                    as output_tok_s,
        min(output_tok_s)::double                       as output_tok_min_s,
        max(output_tok_s)::double                       as output_tok_max_s,
        sum(completed)::integer                         as completed,
        sum(sent)::integer                              as sent
    from points
    where workload is not null and concurrency is not null
    group by run_id, workload, concurrency
),

final as (
    select
        repeated.*,
        prefill.prefill_tok_s,
        coalesce(prefill.prefill_requests, 0)           as prefill_requests
    from repeated
    left join prefill
        on prefill.run_id = repeated.run_id and prefill.workload = repeated.workload
       and prefill.concurrency = repeated.concurrency
)

select * from final

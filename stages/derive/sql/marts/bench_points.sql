-- One row per benchmark point (one result file).
-- ttft_median_s / ttft_p90_s / ttft_p99_s: median, quantile_cont(0.9) and (0.99) of TTFT over the point's successful
--   requests that were not served from the prefix cache (invalid_rows reasons failed and
--   prefix_cache). Requests flagged short_output or cached_share keep their TTFT: the first token
--   was timed like any other; cache_hit_pct beside the figure shows the point's cached share.
-- ttft_requests: the requests those TTFT figures are computed from. Zero when every request of the
--   point failed or came from the cache: the point has no TTFT (both figures null), not a median of
--   the requests the rules leave out.
-- tpot_median_ms: median TPOT over successful requests, leaving out those whose output came in one
--   burst (invalid_rows reason burst_output); decode_tok_s_per_user = 1000 / that. tpot_p90_ms and
--   tpot_p99_ms: quantile_cont(0.9) and (0.99) over the same requests.
-- figures_from: 'requests' when the TTFT/TPOT figures above are computed from per-request arrays
--   (any request has a TTFT); 'tool summary' when the file has no such arrays (and none that
--   could not be read) and the figures are the benchmark tool's own percentiles (median_ttft_ms,
--   p90_ttft_ms, median_tpot_ms), taken as
--   written and not recomputed; then ttft_requests is the point's completed requests, the ones the
--   tool summarised. Null when the point has neither (or completed none).
-- tpot_from: where the TPOT figures come from: 'latencies' or 'itls' (int_requests.tpot_from of
--   the requests they are computed from; a point whose requests mix the two is 'latencies'), or
--   'tool summary': the tool's own median_tpot_ms, p90_tpot_ms and p99_tpot_ms, as written, for a
--   point with no request TPOT to compute (no per-request arrays, or arrays without latencies and
--   itls, as vllm bench serve writes without --save-detailed), its file read without errors.
-- sent / failed: null when the tool recorded neither (SGLang bench_serving writes only completed).
-- seq_limit: the sequences that fit at this workload (already capped by the sequence cap); the
--   cap alone when the workload or the KV pool is unknown; null beyond the maximum context.
-- provisional: the run's gate scored below $gate_min_score, or the run has no gate.
-- cached: the prefix cache served enough of the point's prompts to matter: cache_hit_pct at or
--   above the run profile's rules.cached_mark_pct, or any request of the point left out by the
--   prefix_cache rule (invalid_rows). Render marks every number resting on the point with it.
-- ttft_left_out: the point's requests left out of its TTFT figures (a row of invalid_rows with
--   excludes_ttft: failed or prefix_cache), each once; with ttft_requests, all the requests of a
--   point whose figures come from its requests. prefix_cache_requests: those of them the
--   prefix-cache rule left out.
with points as (
    select * from stg_bench_points
),

-- each request with the rule of whether it counts for the TTFT and the TPOT figures
-- (bench_requests.counts_for_ttft, counts_for_tpot), and valid: listed in no invalid_rows reason
requests as (
    select * from bench_requests
),

flags as (
    select
        run_id,
        point_id,
        request_idx,
        bool_or(excludes_ttft)                         as excluded_from_ttft,
        bool_or(reason = 'prefix_cache')               as prefix_cache
    from invalid_rows
    group by run_id, point_id, request_idx
),

request_stats as (
    select
        requests.run_id,
        requests.point_id,
        count(*)                                                                as requests,
        count(requests.ttft_s)                                                  as timed_requests,
        count(*) filter (where requests.ok)                                     as ok_requests,
        count(*) filter (where not requests.ok)                                 as failed_requests,
        count(*) filter (where requests.counts_for_ttft)                        as ttft_requests,
        median(requests.ttft_s) filter (where requests.counts_for_ttft)         as ttft_median_s,
        quantile_cont(requests.ttft_s, 0.9) filter (where requests.counts_for_ttft)  as ttft_p90_s,
        quantile_cont(requests.ttft_s, 0.99) filter (where requests.counts_for_ttft) as ttft_p99_s,
        median(requests.tpot_ms) filter (where requests.counts_for_tpot)        as tpot_median_ms,
        quantile_cont(requests.tpot_ms, 0.9) filter (where requests.counts_for_tpot)  as tpot_p90_ms,
        quantile_cont(requests.tpot_ms, 0.99) filter (where requests.counts_for_tpot) as tpot_p99_ms,
        max(requests.tpot_from)
            filter (where requests.counts_for_tpot and requests.tpot_ms is not null) as tpot_from,
        count(requests.tpot_ms)                                                 as tpot_timed_requests,
        count(*) filter (where not requests.valid)                              as invalid_requests,
        count(*) filter (where flags.excluded_from_ttft)                        as ttft_left_out,
        count(*) filter (where flags.prefix_cache)                              as prefix_cache_requests
    from requests
    left join flags
        on flags.run_id = requests.run_id
       and flags.point_id = requests.point_id
       and flags.request_idx = requests.request_idx
    group by requests.run_id, requests.point_id
),

summary as (
    select
        points.run_id,
        points.point_id,
        case
            when coalesce(request_stats.timed_requests, 0) > 0 then 'requests'
            when points.completed > 0
             and (points.median_ttft_ms is not null or points.median_tpot_ms is not null)
             and file_errors.source_file is null
            then 'tool summary'
        end as figures_from,
        case
            when request_stats.tpot_median_ms is not null then request_stats.tpot_from
            when coalesce(request_stats.tpot_timed_requests, 0) = 0
             and points.completed > 0
             and points.median_tpot_ms is not null
             and file_errors.source_file is null
            then 'tool summary'
        end as tpot_from
    from points
    left join request_stats
        on request_stats.run_id = points.run_id and request_stats.point_id = points.point_id
    -- a file whose per-request arrays could not be read (unequal lengths, NaN) is not one without
    -- them: its own summary rests on the same unreadable requests and is not published either
    left join (select distinct source_file from stg_ingest_errors) as file_errors
        on file_errors.source_file = points.source_file
),

joined as (
    select
        points.run_id,
        points.point_id,
        points.workload,
        points.concurrency,
        points.repeat,
        workloads.prompt_tokens,
        workloads.output_tokens,
        coalesce(points.num_prompts, request_stats.requests)        as sent,
        coalesce(points.completed, request_stats.ok_requests)       as completed,
        coalesce(points.failed, request_stats.failed_requests)      as failed,
        summary.figures_from,
        case when summary.figures_from = 'tool summary' then points.completed
             else coalesce(request_stats.ttft_requests, 0) end     as ttft_requests,
        case when summary.figures_from = 'tool summary' then points.median_ttft_ms / 1000.0
             when request_stats.ttft_requests > 0 then request_stats.ttft_median_s end as ttft_median_s,
        case when summary.figures_from = 'tool summary' then points.p90_ttft_ms / 1000.0
             when request_stats.ttft_requests > 0 then request_stats.ttft_p90_s end    as ttft_p90_s,
        case when summary.figures_from = 'tool summary' then points.p99_ttft_ms / 1000.0
             when request_stats.ttft_requests > 0 then request_stats.ttft_p99_s end    as ttft_p99_s,
        summary.tpot_from,
        case when summary.tpot_from = 'tool summary' then points.median_tpot_ms
             else request_stats.tpot_median_ms end                  as tpot_median_ms,
        case when summary.tpot_from = 'tool summary' then points.p90_tpot_ms
             else request_stats.tpot_p90_ms end                     as tpot_p90_ms,
        case when summary.tpot_from = 'tool summary' then points.p99_tpot_ms
             else request_stats.tpot_p99_ms end                     as tpot_p99_ms,
        points.output_tok_s,
        point_cache.cache_hit_pct,
        coalesce(request_stats.invalid_requests, 0)                 as invalid_requests,
        case
            when fit.beyond_max_context then null
            else coalesce(fit.sequences, launches.seq_cap::bigint * launches.engines)
        end                                                         as seq_limit,
        gate_flags.provisional                                as provisional,
        points.source_file,
        points.source_line,
        coalesce(json_extract_string(points.value_lines, '$.concurrency')::integer,
                 points.source_line)                                as concurrency_line,
        coalesce(json_extract_string(points.value_lines, '$.output_throughput')::integer,
                 points.source_line)                                as output_tok_s_line,
        points.tool,
        points.tool_version,
        points.summary_paths,
        coalesce(request_stats.ttft_left_out, 0)                    as ttft_left_out,
        coalesce(request_stats.prefix_cache_requests, 0)            as prefix_cache_requests,
        coalesce(point_cache.cache_hit_pct >= rules.cached_mark_pct, false)
            or coalesce(request_stats.prefix_cache_requests, 0) > 0 as cached
    from points
    left join int_run_params as run_params
        on run_params.run_id = points.run_id
    left join param_workloads as workloads
        on workloads.profile is not distinct from run_params.params_profile
       and workloads.workload = points.workload
    left join request_stats
        on request_stats.run_id = points.run_id and request_stats.point_id = points.point_id
    left join summary
        on summary.run_id = points.run_id and summary.point_id = points.point_id
    left join int_point_cache as point_cache
        on point_cache.run_id = points.run_id and point_cache.point_id = points.point_id
    left join launches
        on launches.run_id = points.run_id
    left join sequences_fit as fit
        on fit.run_id = points.run_id and fit.workload = points.workload
    left join int_run_gate_flags as gate_flags
        on gate_flags.run_id = points.run_id
    left join param_rules as rules
        on rules.profile is not distinct from run_params.params_profile
),

final as (
    select
        run_id,
        point_id,
        workload,
        concurrency,
        repeat::integer                                             as repeat,
        prompt_tokens,
        output_tokens,
        sent::integer                                               as sent,
        completed::integer                                          as completed,
        failed::integer                                             as failed,
        ttft_requests::integer                                      as ttft_requests,
        ttft_median_s::double                                       as ttft_median_s,
        ttft_p90_s::double                                          as ttft_p90_s,
        ttft_p99_s::double                                          as ttft_p99_s,
        tpot_median_ms::double                                      as tpot_median_ms,
        tpot_p90_ms::double                                         as tpot_p90_ms,
        tpot_p99_ms::double                                         as tpot_p99_ms,
        figures_from::varchar                                       as figures_from,
        case when tpot_median_ms > 0 then 1000.0 / tpot_median_ms end as decode_tok_s_per_user,
        output_tok_s,
        cache_hit_pct,
        invalid_requests::integer                                   as invalid_requests,
        seq_limit,
        coalesce(concurrency > seq_limit, false)                    as capacity_limited,
        provisional,
        source_file,
        source_line,
        concurrency_line,
        output_tok_s_line,
        tpot_from::varchar                                          as tpot_from,
        coalesce(tool, 'vllm bench serve')                          as tool,
        tool_version,
        summary_paths,
        case when tool is not null then
            'Read from a result file of ' || tool || coalesce(' ' || tool_version, '')
            || ' (its reader: stages/ingest/parsers/tools/' || tool || '/)'
            || coalesce('; the figures its own summary gives are at ' || summary_paths, '') || '.'
        end                                                         as tool_note,
        cached,
        ttft_left_out::integer                                      as ttft_left_out,
        prefix_cache_requests::integer                              as prefix_cache_requests
    from joined
)

select * from final

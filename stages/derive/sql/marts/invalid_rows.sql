-- Requests kept out of the figures, one row per request and reason:
--   prefix_cache  prefill rate above prefix_cache_tok_s: answered from the prefix cache
--   failed        the request reported an error
--   short_output  a successful request produced fewer tokens than its workload asks for
--   cached_share  every request of a point whose engine counters show more than
--                 $cached_share_max_pct percent of prompt tokens served from cache
--   burst_output  a successful request whose tokens after the first came faster than
--                 burst_tpot_ms ms apart on average: they reached the client in one burst (the
--                 client was not reading as they were sent), so its TPOT does not time decoding
-- prefix_cache_tok_s and burst_tpot_ms are the rules of the run's own profile (param_rules).
-- excludes_ttft / excludes_tpot: whether the reason keeps the request out of its point's TTFT
-- statistics (failed, prefix_cache) and out of its TPOT statistics (failed, burst_output). The
-- rule is stated here, beside each reason, once: bench_points reads it for ttft_requests and its
-- figures, and the render stage for the requests it says were left out. short_output and
-- cached_share flag a request and keep it in both: its first token was timed like any other.
with requests as (
    select
        int_requests.*,
        rules.prefix_cache_tok_s,
        rules.burst_tpot_ms
    from int_requests
    left join int_run_params as run_params
        on run_params.run_id = int_requests.run_id
    join param_rules as rules
        on rules.profile is not distinct from run_params.params_profile
),

point_cache as (
    select * from int_point_cache
),

prefix_cache as (
    select
        run_id, point_id, workload, concurrency, request_idx,
        'prefix_cache'                                      as reason,
        format('prefill {:,.0f} tok/s is above the {:,.0f} tok/s cache rule',
               prefill_tok_s, prefix_cache_tok_s)  as detail,
        prefill_tok_s                                       as value,
        prefix_cache_tok_s                         as threshold,
        source_file,
        source_line,
        true                                                as excludes_ttft,
        false                                               as excludes_tpot
    from requests
    where ok and prefill_tok_s > prefix_cache_tok_s
),

failed as (
    select
        run_id, point_id, workload, concurrency, request_idx,
        'failed'                                            as reason,
        'request failed: ' || left(regexp_replace(trim(error), '\s+', ' ', 'g'), 200) as detail,
        null::double                                        as value,
        null::double                                        as threshold,
        source_file,
        source_line,
        true                                                as excludes_ttft,
        true                                                as excludes_tpot
    from requests
    where not ok
),

short_output as (
    select
        run_id, point_id, workload, concurrency, request_idx,
        'short_output'                                      as reason,
        format('produced {:,} of the {:,} output tokens its workload asks for',
               output_tokens, workload_output_tokens)       as detail,
        output_tokens::double                               as value,
        workload_output_tokens::double                      as threshold,
        source_file,
        source_line,
        false                                               as excludes_ttft,
        false                                               as excludes_tpot
    from requests
    where ok and output_tokens < workload_output_tokens
),

cached_share as (
    select
        requests.run_id, requests.point_id, requests.workload, requests.concurrency, requests.request_idx,
        'cached_share'                                      as reason,
        format('the engine served {:.1f}% of this point''s prompt tokens from its prefix cache, above the {:.1f}% rule',
               point_cache.cache_hit_pct, $cached_share_max_pct::double) as detail,
        point_cache.cache_hit_pct                           as value,
        $cached_share_max_pct::double                       as threshold,
        point_cache.source_file,
        point_cache.source_line,
        false                                               as excludes_ttft,
        false                                               as excludes_tpot
    from requests
    join point_cache
        on point_cache.run_id = requests.run_id and point_cache.point_id = requests.point_id
    where point_cache.cache_hit_pct > $cached_share_max_pct::double
),

burst_output as (
    select
        run_id, point_id, workload, concurrency, request_idx,
        'burst_output'                                      as reason,
        format('{:,} tokens came {:.4f} ms apart after the first, below the {:.2f} ms burst rule: TPOT does not time decoding',
               output_tokens, tpot_ms, burst_tpot_ms) as detail,
        tpot_ms                                             as value,
        burst_tpot_ms                              as threshold,
        source_file,
        source_line,
        false                                               as excludes_ttft,
        true                                                as excludes_tpot
    from requests
    where ok and output_tokens > 1 and tpot_ms < burst_tpot_ms
),

unioned as (
    select * from prefix_cache
    union all
    select * from failed
    union all
    select * from short_output
    union all
    select * from cached_share
    union all
    select * from burst_output
),

final as (
    select
        run_id,
        point_id,
        workload,
        concurrency,
        request_idx,
        reason,
        detail,
        value,
        threshold,
        source_file,
        source_line,
        excludes_ttft,
        excludes_tpot
    from unioned
)

select * from final

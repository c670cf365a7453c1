-- Requests kept out of the figures, one row per request and reason:
--   prefix_cache  prefill rate above prefix_cache_tok_s: answered from the prefix cache
--   failed        the request reported an error
--   short_output  a successful request produced fewer tokens than its workload asks for
--   cached_share  every request of a point whose engine counters show more than
--                 $cached_share_max_pct percent of prompt tokens served from cache
--   burst_output  a successful request whose tokens after the first came faster than
--                 burst_tpot_ms ms apart on average: they reached the client in one burst (the
--                 client was not reading as they were sent), so its TPOT does not time decoding
--   text_not_output  a successful request whose generated text holds more than
--                 $max_chars_per_token characters per output token: text its tokens cannot spell.
--                 The result file keeps no prompt (vllm bench serve --save-detailed writes
--                 input_lens, output_lens, ttfts, itls, generated_texts, errors), so whether the
--                 text is its prompt sent back is judged by length: the detail compares it with
--                 the prompt's length at the characters per token of the run's other answers
--                 (prompt_ratio). vLLM 0.25 and later re-emit a prompt whose decoded text ends in
--                 U+FFFD inside the first streamed delta (vllm-project/vllm issue 48853); random
--                 prompts end so now and then. The rule is off where $max_chars_per_token is null.
--   output_count  a successful request that produced more output tokens than its workload asks
--                 for: the client asks max_tokens of that count (and, under --ignore-eos, exactly
--                 that count), so more is a miscount (an older client that counts tokens by
--                 encoding the text counts an echoed prompt); fewer is short_output.
-- prefix_cache_tok_s and burst_tpot_ms are the rules of the run's own profile (param_rules).
-- excludes_ttft / excludes_tpot: whether the reason keeps the request out of its point's TTFT
-- statistics (failed, prefix_cache) and out of its TPOT statistics (failed, burst_output). The
-- rule is stated here, beside each reason, once: bench_points reads it for ttft_requests and its
-- figures, and the render stage for the requests it says were left out. short_output and
-- cached_share flag a request and keep it in both: its first token was timed like any other.
-- text_not_output keeps it out of the TTFT (its first delta carried the whole prompt decoded again,
-- work a correct engine does not do before that token, megabytes at a million tokens) and in the
-- TPOT (its token count is the engine's own and the gaps after the first are timed as any
-- other's); output_count keeps it out of the TPOT, which divides by that count.
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

-- characters per output token of each answer, and the run's usual figure (the median of its
-- answers within the rule) that a prompt's length in characters is estimated at
texts as (
    select
        *,
        length(generated_text)                              as text_chars,
        length(generated_text)::double / output_tokens      as chars_per_token
    from requests
    where ok and output_tokens > 0 and generated_text is not null
),

run_chars as (
    select run_id, median(chars_per_token) as run_chars_per_token
    from texts
    where chars_per_token <= $max_chars_per_token::double
    group by run_id
),

text_not_output as (
    select
        texts.run_id, texts.point_id, texts.workload, texts.concurrency, texts.request_idx,
        'text_not_output'                                   as reason,
        format('generated_texts[{:d}] holds {:,} characters for {:,} output tokens ({:,.1f} a token, above the {:,.1f} rule)',
               texts.request_idx, texts.text_chars, texts.output_tokens, texts.chars_per_token,
               $max_chars_per_token::double)
            || case when run_chars.run_chars_per_token is not null and texts.input_tokens > 0
                    then format('; {:.2f} times the length of its {:,}-token prompt at the run''s {:.1f} characters a token',
                                texts.text_chars / (texts.input_tokens * run_chars.run_chars_per_token),
                                texts.input_tokens, run_chars.run_chars_per_token)
                    else '' end                             as detail,
        texts.chars_per_token                               as value,
        $max_chars_per_token::double                        as threshold,
        texts.source_file,
        texts.source_line,
        true                                                as excludes_ttft,
        false                                               as excludes_tpot
    from texts
    left join run_chars on run_chars.run_id = texts.run_id
    where texts.chars_per_token > $max_chars_per_token::double
),

output_count as (
    select
        run_id, point_id, workload, concurrency, request_idx,
        'output_count'                                      as reason,
        format('output_lens[{:d}] is {:,} output tokens, more than the {:,} its workload asks for',
               request_idx, output_tokens, workload_output_tokens) as detail,
        output_tokens::double                               as value,
        workload_output_tokens::double                      as threshold,
        source_file,
        source_line,
        false                                               as excludes_ttft,
        true                                                as excludes_tpot
    from requests
    where ok and output_tokens > workload_output_tokens
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

-- each reason's rows already stand in the published columns' order
final as (
    select * from prefix_cache
    union all
    select * from failed
    union all
    select * from short_output
    union all
    select * from cached_share
    union all
    select * from burst_output
    union all
    select * from text_not_output
    union all
    select * from output_count
)

select * from final

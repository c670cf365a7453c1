-- One row per sample of a /metrics series file: the families the campaign reads, each summed over
-- the engines that exposed it (one line per `engine` label of a data-parallel launch; KV usage,
-- a share of each engine's own pool, is their mean), vLLM's and SGLang's names taken alike:
--   running      vllm:num_requests_running        sglang:num_running_reqs
--   waiting      vllm:num_requests_waiting        sglang:num_queue_reqs
--   kv_usage     vllm:kv_cache_usage_perc (older vllm:gpu_cache_usage_perc)   sglang:token_usage
--   preemptions  vllm:num_preemptions_total       sglang:num_retracted_reqs_total   (counter)
--   prompt       vllm:prompt_tokens_total         sglang:prompt_tokens_total        (counter)
--   generation   vllm:generation_tokens_total     sglang:generation_tokens_total    (counter)
-- *_line: the line of the value where one line holds it (one engine); else the sample's `@` line;
-- null where the sample has no such value.
-- zero_s: the point's clock origin, the file's `# requests_start=` (first such line), else its
-- first sample's time. A sample whose scrape failed has its error and no figures. Requests and
-- preemptions are whole numbers (exposed as 4.0); the token counters and KV usage are kept as read.
with lines as (
    select * from stg_metrics_series
),

families as (
    select
        *,
        case
            when metric_name in ('vllm:num_requests_running', 'sglang:num_running_reqs') then 'running'
            when metric_name in ('vllm:num_requests_waiting', 'sglang:num_queue_reqs') then 'waiting'
            when metric_name in ('vllm:kv_cache_usage_perc', 'sglang:token_usage') then 'kv_usage'
            when metric_name = 'vllm:gpu_cache_usage_perc' then 'kv_usage_old'
            when metric_name in ('vllm:num_preemptions_total', 'sglang:num_retracted_reqs_total') then 'preemptions'
            when metric_name in ('vllm:prompt_tokens_total', 'sglang:prompt_tokens_total') then 'prompt'
            when metric_name in ('vllm:generation_tokens_total', 'sglang:generation_tokens_total') then 'generation'
        end                                                                   as family
    from lines
),

headers as (
    select run_id, point_id, source_file, sample_idx, t_s, error, source_line
    from lines
    where metric_name is null
),

per_sample as (
    select
        run_id,
        point_id,
        source_file,
        sample_idx,
        sum(metric_value) filter (where family = 'running')                  as running,
        count(*) filter (where family = 'running')                           as running_lines,
        min(source_line) filter (where family = 'running')                   as running_value_line,
        sum(metric_value) filter (where family = 'waiting')                  as waiting,
        count(*) filter (where family = 'waiting')                           as waiting_lines,
        min(source_line) filter (where family = 'waiting')                   as waiting_value_line,
        avg(metric_value order by source_line) filter (where family = 'kv_usage') as kv_usage,
        count(*) filter (where family = 'kv_usage')                          as kv_lines,
        min(source_line) filter (where family = 'kv_usage')                  as kv_value_line,
        avg(metric_value order by source_line) filter (where family = 'kv_usage_old') as kv_usage_old,
        count(*) filter (where family = 'kv_usage_old')                      as kv_old_lines,
        min(source_line) filter (where family = 'kv_usage_old')              as kv_old_value_line,
        sum(metric_value) filter (where family = 'preemptions')              as preemptions_total,
        sum(metric_value) filter (where family = 'prompt')                   as prompt_tokens_total,
        sum(metric_value) filter (where family = 'generation')               as generation_tokens_total
    from families
    where metric_name is not null
    group by run_id, point_id, source_file, sample_idx
),

origins as (
    select
        run_id,
        point_id,
        source_file,
        try_cast(requests_start as double)                                    as requests_start_s,
        try_cast(requests_end as double)                                      as requests_end_s
    from int_sampler_settings
    where sampler = 'metrics'
),

final as (
    select
        h.run_id,
        h.point_id,
        h.source_file,
        h.sample_idx,
        h.t_s,
        h.error,
        h.source_line,
        coalesce(o.requests_start_s, min(h.t_s) over (partition by h.run_id, h.point_id, h.source_file))
                                                                              as zero_s,
        o.requests_start_s,
        o.requests_end_s,
        case when h.error is null then round(s.running)::bigint end           as running,
        case when h.error is null then round(s.waiting)::bigint end           as waiting,
        case when h.error is null
             then 100.0 * coalesce(s.kv_usage, s.kv_usage_old) end            as kv_usage_pct,
        case when h.error is null then round(s.preemptions_total)::bigint end as preemptions_total,
        case when h.error is null then s.prompt_tokens_total end              as prompt_tokens_total,
        case when h.error is null then s.generation_tokens_total end          as generation_tokens_total,
        case
            when h.error is not null or s.running is null then null
            when s.running_lines = 1 then s.running_value_line else h.source_line
        end                                                                   as running_line,
        case
            when h.error is not null or s.waiting is null then null
            when s.waiting_lines = 1 then s.waiting_value_line else h.source_line
        end                                                                   as waiting_line,
        case
            when h.error is not null then null
            when s.kv_usage is not null then (case when s.kv_lines = 1 then s.kv_value_line else h.source_line end)
            when s.kv_usage_old is not null then (case when s.kv_old_lines = 1 then s.kv_old_value_line else h.source_line end)
        end                                                                   as kv_line
    from headers as h
    left join per_sample as s
        on s.run_id = h.run_id and s.point_id = h.point_id and s.source_file = h.source_file
        and s.sample_idx = h.sample_idx
    left join origins as o
        on o.run_id = h.run_id and o.point_id = h.point_id and o.source_file = h.source_file
)

select * from final

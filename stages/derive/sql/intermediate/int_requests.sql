-- Benchmark requests with their point's workload and the figures derived from them.
-- latency_s: the request's end-to-end latency as its result file holds it (latencies[i]), else the
--   time to its first token plus its inter-token latencies (ttfts[i] + sum(itls[i]), which is how
--   vllm bench serve measures a latency; 0.2x writes no latencies); latency_from says which.
-- tpot_ms = (latency - ttft) / (output tokens - 1) * 1000, from latencies[i] where the file has
--   them, else sum(itls[i]) / (output tokens - 1) * 1000 (the same time: the gaps between the
--   first token and the last); tpot_from says which ('latencies' or 'itls').
--   A request of another benchmark tool's file that records its own time per output token
--   (inter-token latency) keeps it: tpot_from 'tool request'.
-- prefill_tok_s = input tokens / ttft.
-- ok: the request reported no error. The workload's sizes are those of the run's own profile.
with requests as (
    select
        *,
        case
            when tool_tpot_ms is not null then 'tool request'
            when output_tokens > 1 and latency_s is not null and ttft_s is not null then 'latencies'
            when output_tokens > 1 and latency_s is null and itl_count > 0 then 'itls'
        end                                             as tpot_from
    from stg_bench_requests
),

points as (
    select run_id, point_id, workload, concurrency, repeat from stg_bench_points
),

run_params as (
    select * from int_run_params
),

workloads as (
    select profile, workload, prompt_tokens, output_tokens from param_workloads
),

final as (
    select
        requests.run_id,
        requests.point_id,
        points.workload,
        points.concurrency,
        coalesce(points.repeat, 1)                      as repeat,
        requests.request_idx,
        requests.input_tokens,
        requests.output_tokens,
        requests.ttft_s,
        coalesce(requests.latency_s, requests.ttft_s + requests.itl_sum_s) as latency_s,
        case
            when requests.latency_s is not null then 'latencies'
            when requests.ttft_s is not null and requests.itl_sum_s is not null then 'ttft + itls'
        end                                             as latency_from,
        requests.start_time_s,
        case requests.tpot_from
            when 'tool request' then requests.tool_tpot_ms
            when 'latencies' then (requests.latency_s - requests.ttft_s) / (requests.output_tokens - 1) * 1000
            when 'itls' then requests.itl_sum_s / (requests.output_tokens - 1) * 1000
        end                                             as tpot_ms,
        requests.tpot_from,
        case
            when requests.ttft_s > 0 then requests.input_tokens / requests.ttft_s
        end                                             as prefill_tok_s,
        nullif(requests.error, '')                      as error,
        coalesce(requests.error, '') = ''               as ok,
        requests.generated_text,
        workloads.output_tokens                         as workload_output_tokens,
        requests.source_file,
        requests.source_line,
        requests.record_path,
        requests.field_paths
    from requests
    left join points
        on points.run_id = requests.run_id and points.point_id = requests.point_id
    left join run_params
        on run_params.run_id = requests.run_id
    left join workloads
        on workloads.profile is not distinct from run_params.params_profile
       and workloads.workload = points.workload
)

select * from final

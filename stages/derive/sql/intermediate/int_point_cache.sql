-- Share of prompt tokens the engine served from its prefix cache during each benchmark point:
-- 100 * (hits after - hits before) / (queries after - queries before), each counter summed over
-- its label sets. Current names (vllm:prefix_cache_*) are preferred; older builds exposed
-- vllm:gpu_prefix_cache_*. Null when either snapshot lacks the counters or no query was made.
with samples as (
    select
        run_id,
        point_id,
        phase,
        case
            when metric_name in ('vllm:prefix_cache_hits_total', 'vllm:prefix_cache_hits') then 'hits'
            when metric_name in ('vllm:prefix_cache_queries_total', 'vllm:prefix_cache_queries') then 'queries'
            when metric_name in ('vllm:gpu_prefix_cache_hits_total', 'vllm:gpu_prefix_cache_hits') then 'hits'
            when metric_name in ('vllm:gpu_prefix_cache_queries_total', 'vllm:gpu_prefix_cache_queries') then 'queries'
        end                                                     as counter,
        case when metric_name like 'vllm:gpu_%' then 2 else 1 end as generation,
        metric_value,
        source_file,
        source_line
    from stg_metrics
    where phase in ('before', 'after')
),

sums as (
    select
        run_id,
        point_id,
        generation,
        sum(metric_value) filter (where phase = 'before' and counter = 'hits')    as hits_before,
        sum(metric_value) filter (where phase = 'after' and counter = 'hits')     as hits_after,
        sum(metric_value) filter (where phase = 'before' and counter = 'queries') as queries_before,
        sum(metric_value) filter (where phase = 'after' and counter = 'queries')  as queries_after,
        min(source_file) filter (where phase = 'after' and counter = 'hits')      as source_file,
        min(source_line) filter (where phase = 'after' and counter = 'hits')      as source_line
    from samples
    where counter is not null
    group by run_id, point_id, generation
),

complete as (
    select * from sums
    where hits_before is not null and hits_after is not null
      and queries_before is not null and queries_after is not null
    qualify row_number() over (partition by run_id, point_id order by generation) = 1
),

final as (
    select
        run_id,
        point_id,
        hits_after - hits_before                        as hits_delta,
        queries_after - queries_before                  as queries_delta,
        case
            when queries_after - queries_before > 0
            then 100.0 * (hits_after - hits_before) / (queries_after - queries_before)
        end                                             as cache_hit_pct,
        source_file,
        source_line
    from complete
)

select * from final

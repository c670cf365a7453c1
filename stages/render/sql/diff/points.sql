-- Benchmark points of two run sets, matched and compared metric by metric.
-- Input: side_points (built by stages/render/diff.py), one row per point of each side, with match_key
-- holding the attributes that identify a point across the two sides (model, layout, context as
-- the comparison needs). $tolerance_pct: changes within it are marked 'same' (noise).
-- Marks here are the fixed-tolerance ones; diff.py replaces better, worse and same with the marks of
-- the change's confidence interval (stages/render/diff_stats.py).
-- Marks: better, worse, same, new failure, fixed, not comparable, no TTFT, only in base, only in head.
-- no TTFT: a TTFT metric where a side's point has no TTFT (ttft_requests = 0: every request failed
-- or was served from the prefix cache, which the rules leave out of TTFT); there is nothing to compare.
-- note: why a row needs care, naming the side: capacity-limited (base, head or both), no TTFT
-- (its side and why), provisional.
with pooled as (
    -- a side may hold several rows of one point (its repeats): one row per point, the figures
    -- of a single repeat as they are, of several their mean (diff_sides.py pools the requests)
    select
        side, match_key, workload, concurrency, point_table,
        min(run_id) as run_id, count(*) as repeats,
        any_value(max_model_len) as max_model_len, any_value(kv_cache_dtype) as kv_cache_dtype,
        sum(sent) as sent, sum(completed) as completed, sum(ttft_requests) as ttft_requests,
        avg(ttft_median_s order by ttft_median_s) as ttft_median_s,
        avg(ttft_p90_s order by ttft_p90_s) as ttft_p90_s,
        avg(tpot_median_ms order by tpot_median_ms) as tpot_median_ms,
        avg(output_tok_s order by output_tok_s) as output_tok_s,
        bool_or(capacity_limited) as capacity_limited, bool_or(provisional) as provisional
    from side_points
    group by side, match_key, workload, concurrency, point_table
),

base as (
    select * from pooled where side = 'base'
),

head as (
    select * from pooled where side = 'head'
),

paired as (
    select
        coalesce(base.match_key, head.match_key)       as match_key,
        coalesce(base.workload, head.workload)         as workload,
        coalesce(base.concurrency, head.concurrency)   as concurrency,
        coalesce(base.point_table, head.point_table)   as point_table,
        base.run_id                                    as base_run_id,
        head.run_id                                    as head_run_id,
        base.max_model_len is distinct from head.max_model_len
            or base.kv_cache_dtype is distinct from head.kv_cache_dtype as settings_differ,
        base.run_id is not null                        as in_base,
        head.run_id is not null                        as in_head,
        base.sent < 1 or base.completed < base.sent    as base_failed,
        head.sent < 1 or head.completed < head.sent    as head_failed,
        base.capacity_limited or head.capacity_limited as capacity_limited,
        case
            when base.capacity_limited and head.capacity_limited then 'both'
            when base.capacity_limited then 'base'
            when head.capacity_limited then 'head'
        end                                            as capacity_limited_side,
        case
            when base.ttft_requests = 0 and head.ttft_requests = 0 then 'both'
            when base.ttft_requests = 0 then 'base'
            when head.ttft_requests = 0 then 'head'
        end                                            as no_ttft_side,
        base.provisional or head.provisional           as provisional,
        base.repeats                                   as base_repeats,
        head.repeats                                   as head_repeats,
        base.ttft_median_s   as base_ttft_median_s,   head.ttft_median_s   as head_ttft_median_s,
        base.ttft_p90_s      as base_ttft_p90_s,      head.ttft_p90_s      as head_ttft_p90_s,
        base.tpot_median_ms  as base_tpot_median_ms,  head.tpot_median_ms  as head_tpot_median_ms,
        base.output_tok_s    as base_output_tok_s,    head.output_tok_s    as head_output_tok_s,
        100.0 * base.completed / nullif(base.sent, 0) as base_completed_pct,
        100.0 * head.completed / nullif(head.sent, 0) as head_completed_pct
    from base
    full outer join head
        on base.match_key = head.match_key
        and base.workload = head.workload
        and base.concurrency = head.concurrency
        and base.point_table = head.point_table
),

metrics as (
    select * from (values
        (1, 'ttft_median_s', 'lower'),
        (2, 'ttft_p90_s', 'lower'),
        (3, 'tpot_median_ms', 'lower'),
        (4, 'output_tok_s', 'higher'),
        (5, 'completed_pct', 'higher')
    ) as m(metric_order, metric, better_when)
),

long as (
    select
        paired.*,
        metrics.metric_order,
        metrics.metric,
        metrics.better_when,
        case metrics.metric
            when 'ttft_median_s' then base_ttft_median_s
            when 'ttft_p90_s' then base_ttft_p90_s
            when 'tpot_median_ms' then base_tpot_median_ms
            when 'output_tok_s' then base_output_tok_s
            else base_completed_pct
        end as base_value,
        case metrics.metric
            when 'ttft_median_s' then head_ttft_median_s
            when 'ttft_p90_s' then head_ttft_p90_s
            when 'tpot_median_ms' then head_tpot_median_ms
            when 'output_tok_s' then head_output_tok_s
            else head_completed_pct
        end as head_value
    from paired
    cross join metrics
),

marked as (
    select
        *,
        head_value - base_value as change,
        100.0 * (head_value - base_value) / nullif(abs(base_value), 0) as change_pct,
        case
            when not in_base then 'only in head'
            when not in_head then 'only in base'
            when settings_differ then 'not comparable'
            when metric like 'ttft%' and no_ttft_side is not null then 'no TTFT'
            when metric = 'completed_pct' and not base_failed and head_failed then 'new failure'
            when metric = 'completed_pct' and base_failed and not head_failed then 'fixed'
            when base_value is null or head_value is null then 'not comparable'
            when abs(head_value - base_value) <= $tolerance_pct / 100.0 * abs(base_value) then 'same'
            when (better_when = 'lower') = (head_value < base_value) then 'better'
            else 'worse'
        end as mark
    from long
),

noted as (
    select
        *,
        nullif(concat_ws(', ',
            case when capacity_limited_side is not null
                 then 'capacity-limited (' || capacity_limited_side || ')' end,
            case when metric like 'ttft%' and no_ttft_side is not null
                 then 'no TTFT (' || no_ttft_side || '): every request failed or came from the prefix cache' end,
            case when provisional then 'provisional' end
        ), '')                                         as note
    from marked
),

final as (
    select
        match_key, workload, concurrency, metric, base_value, head_value, change, change_pct,
        mark, better_when, note, capacity_limited, capacity_limited_side, no_ttft_side, provisional,
        base_run_id, head_run_id, point_table, base_repeats, head_repeats
    from noted
    order by match_key, workload, concurrency, metric_order
)

select * from final

-- Launch outcomes and gate scores of two run sets, matched on match_key.
-- status: ready -> failed is a new failure, failed -> ready is fixed; the KV pool and gate score
-- compare like point metrics ($tolerance_pct). The start-up time is one timing a side (each side's
-- current launch), which cannot tell a change from noise: it is unclear, and its note says why.
with base as (
    select * from side_launches where side = 'base'
),

head as (
    select * from side_launches where side = 'head'
),

paired as (
    select
        coalesce(base.match_key, head.match_key) as match_key,
        base.run_id as base_run_id,
        head.run_id as head_run_id,
        base.run_id is not null as in_base,
        head.run_id is not null as in_head,
        base.max_model_len is distinct from head.max_model_len
            or base.kv_cache_dtype is distinct from head.kv_cache_dtype as settings_differ,
        base.status as base_status, head.status as head_status,
        base.ready_s as base_ready_s, head.ready_s as head_ready_s,
        base.kv_tokens as base_kv_tokens, head.kv_tokens as head_kv_tokens,
        base.gate_score as base_gate_score, head.gate_score as head_gate_score
    from base
    full outer join head on base.match_key = head.match_key
),

items as (
    select * from (values
        (1, 'status', 'none', false),
        (2, 'ready_s', 'lower', true),
        (3, 'kv_tokens', 'higher', false),
        (4, 'gate_score', 'higher', false)
    ) as i(item_order, item, better_when, timed)
),

long as (
    select
        paired.*, items.item_order, items.item, items.better_when, items.timed,
        case items.item
            when 'status' then base_status
            when 'ready_s' then base_ready_s::varchar
            when 'kv_tokens' then base_kv_tokens::varchar
            else base_gate_score::varchar
        end as base_value,
        case items.item
            when 'status' then head_status
            when 'ready_s' then head_ready_s::varchar
            when 'kv_tokens' then head_kv_tokens::varchar
            else head_gate_score::varchar
        end as head_value,
        case items.item
            when 'ready_s' then base_ready_s
            when 'kv_tokens' then base_kv_tokens
            when 'gate_score' then base_gate_score
        end as base_num,
        case items.item
            when 'ready_s' then head_ready_s
            when 'kv_tokens' then head_kv_tokens
            when 'gate_score' then head_gate_score
        end as head_num
    from paired
    cross join items
),

marked as (
    select
        *,
        head_num - base_num as change,
        100.0 * (head_num - base_num) / nullif(abs(base_num), 0) as change_pct,
        case
            when not in_base then 'only in head'
            when not in_head then 'only in base'
            when item = 'status' and base_status = 'ready' and head_status <> 'ready' then 'new failure'
            when item = 'status' and base_status <> 'ready' and head_status = 'ready' then 'fixed'
            when item = 'status' then 'same'
            when settings_differ then 'not comparable'
            when base_num is null or head_num is null then 'not comparable'
            when timed then 'unclear'
            when abs(head_num - base_num) <= $tolerance_pct / 100.0 * abs(base_num) then 'same'
            when (better_when = 'lower') = (head_num < base_num) then 'better'
            else 'worse'
        end as mark
    from long
),

noted as (
    select
        *,
        case when timed and mark = 'unclear' then 'one launch a side' end as note
    from marked
),

final as (
    select match_key, item, base_value, head_value, change, change_pct, mark, note, base_run_id, head_run_id
    from noted
    order by match_key, item_order
)

select * from final

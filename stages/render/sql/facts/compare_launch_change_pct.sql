-- Change of one launch figure (ready_s, kv_tokens, gate_score) from the base run to the head run
-- of a comparison, in percent of the base value (as `campaign diff` computes it). A computed figure:
-- no raw line holds it (the base and head values cite theirs); both runs are listed.
with base as (
    select
        l.run_id, l.ready_s, l.kv_tokens, g.score as gate_score
    from launches as l
    left join gates as g on g.run_id = l.run_id and g.gate = 'niah'
    where l.run_id = $base_run_id
),

head as (
    select
        l.run_id, l.ready_s, l.kv_tokens, g.score as gate_score,
        case $item
            when 'kv_tokens' then l.kv_source_file
            when 'gate_score' then g.source_file
            else l.source_file
        end as source_file,
        case $item
            when 'kv_tokens' then l.kv_source_line
            when 'gate_score' then g.source_line
            else l.source_line
        end as source_line
    from launches as l
    left join gates as g on g.run_id = l.run_id and g.gate = 'niah'
    where l.run_id = $head_run_id
),

paired as (
    select
        case $item
            when 'ready_s' then base.ready_s
            when 'kv_tokens' then base.kv_tokens
            when 'gate_score' then base.gate_score
        end::double as base_value,
        case $item
            when 'ready_s' then head.ready_s
            when 'kv_tokens' then head.kv_tokens
            when 'gate_score' then head.gate_score
        end::double as head_value,
        base.run_id as base_run_id,
        head.run_id as head_run_id,
        head.source_file,
        head.source_line
    from base
    cross join head
),

final as (
    select
        100.0 * (head_value - base_value) / nullif(abs(base_value), 0) as value,
        printf('%+.1f', 100.0 * (head_value - base_value) / nullif(abs(base_value), 0)) as display,
        '%' as unit,
        [base_run_id, head_run_id] as run_id,
        'Computed from the base and head values, whose facts cite their own raw lines.' as source_note,
        cast(null as varchar) as source_file,
        cast(null as integer) as source_line
    from paired
)

select * from final

-- One row per turn of each ramp workload: every session sends its turn at once, and the next turn
-- starts when all have answered, so a turn is one step up the context ramp.
-- answered: successful requests. context_tokens: the largest prompt of the turn.
-- longest_wait_s: the longest any session waited for the turn's first token (successful requests).
-- needle_found / needle_checked: successful requests whose answer held the needle planted in turn
--   one, of those checked.
-- cache_hit_pct: the engine's prefix-cache share over the turn, from the /metrics snapshots of
--   point <workload>__tNN (null without them).
-- provisional: the run's gate scored below $gate_min_score, or the run has no gate (as bench_points).
-- source_file / source_line: the request with the longest wait, else the turn's first request.
with requests as (
    select * from turn_requests where kind = 'ramp'
),

turn_stats as (
    select
        run_id,
        workload,
        turn,
        (count(*) filter (where ok))::integer                   as answered,
        max(input_tokens)                                       as context_tokens,
        max(ttft_s) filter (where ok)                           as longest_wait_s,
        max(latency_s) filter (where ok)                        as latency_max_s,
        (count(*) filter (where ok and needle_ok))::integer     as needle_found,
        (count(*) filter (where ok and needle_ok is not null))::integer as needle_checked
    from requests
    group by run_id, workload, turn
),

evidence as (
    select run_id, workload, turn, source_file, source_line
    from requests
    qualify row_number() over (
        partition by run_id, workload, turn
        order by ok desc, case when ok then ttft_s end desc nulls last, request_idx
    ) = 1
),

final as (
    select
        turn_stats.run_id,
        turn_stats.workload,
        turn_stats.turn,
        workloads.sessions,
        turn_stats.answered,
        turn_stats.context_tokens,
        turn_stats.longest_wait_s,
        turn_stats.latency_max_s,
        turn_stats.needle_found,
        turn_stats.needle_checked,
        point_cache.cache_hit_pct,
        gate_flags.provisional,
        evidence.source_file,
        evidence.source_line
    from turn_stats
    join stg_turn_workloads as workloads
        on workloads.run_id = turn_stats.run_id and workloads.workload = turn_stats.workload
       and workloads.kind = 'ramp'
    join evidence
        on evidence.run_id = turn_stats.run_id
       and evidence.workload = turn_stats.workload
       and evidence.turn = turn_stats.turn
    left join int_point_cache as point_cache
        on point_cache.run_id = turn_stats.run_id
       and point_cache.point_id = printf('%s__t%02d', turn_stats.workload, turn_stats.turn)
    left join int_run_gate_flags as gate_flags
        on gate_flags.run_id = turn_stats.run_id
)

select * from final

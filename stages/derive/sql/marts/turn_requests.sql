-- One row per request of the multi-turn workloads (ramp and agents).
-- tpot_ms = (latency - ttft) / (output tokens - 1) * 1000, for requests with more than one token.
-- ok: the request reported no error. burst: a successful request whose tokens after the first came
--   faster than burst_tpot_ms (the rule of the run's own profile) ms apart on average (the invalid_rows burst_output rule): they
--   reached the client in one burst, so its TPOT does not time decoding.
-- The prefix-cache rules of invalid_rows do not apply: these workloads re-send a growing history
-- on purpose, to be served from the cache; cache_hit_pct of ramp_turns and agent_runs reports it.
with requests as (
    select
        stg_turn_requests.*,
        rules.burst_tpot_ms                             as burst_rule_ms
    from stg_turn_requests
    left join int_run_params as run_params
        on run_params.run_id = stg_turn_requests.run_id
    join param_rules as rules
        on rules.profile is not distinct from run_params.params_profile
),

figures as (
    select
        *,
        case
            when output_tokens > 1 and latency_s is not null and ttft_s is not null
            then (latency_s - ttft_s) / (output_tokens - 1) * 1000
        end                                             as tpot_ms_value,
        coalesce(error, '') = ''                        as ok_value
    from requests
),

final as (
    select
        run_id,
        workload,
        kind,
        point_id,
        session,
        turn,
        request_idx,
        target_tokens,
        input_tokens,
        output_tokens,
        ttft_s,
        latency_s,
        max_itl_s,
        started_s,
        tpot_ms_value                                   as tpot_ms,
        needle_ok,
        answer,
        nullif(error, '')                               as error,
        ok_value                                        as ok,
        coalesce(ok_value and output_tokens > 1 and tpot_ms_value < burst_rule_ms,
                 false)                                 as burst,
        source_file,
        source_line
    from figures
)

select * from final

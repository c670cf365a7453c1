-- How many sequences of each workload of its own profile fit at once in each ready launch.
-- fit_by_kv = floor(KV pool tokens of one engine / (prompt + output tokens)) x engines.
-- sequences = the lower of fit_by_kv and the sequence cap, which applies to each engine
-- (seq_cap x engines); null, with beyond_max_context, where prompt + output exceeds the
-- server's maximum context.
with ready_launches as (
    select * from launches
    where status = 'ready'
),

run_params as (
    select * from int_run_params
),

workloads as (
    select * from param_workloads
),

sized as (
    select
        ready_launches.run_id,
        workloads.workload,
        workloads.prompt_tokens,
        workloads.output_tokens,
        workloads.prompt_tokens + workloads.output_tokens       as context_tokens,
        ready_launches.kv_tokens,
        ready_launches.engines,
        ready_launches.seq_cap,
        ready_launches.max_model_len,
        ready_launches.kv_source_file,
        ready_launches.kv_source_line
    from ready_launches
    left join run_params
        on run_params.run_id = ready_launches.run_id
    join workloads
        on workloads.profile is not distinct from run_params.params_profile
),

fitted as (
    select
        *,
        coalesce(context_tokens > max_model_len, false)         as beyond_max_context,
        (floor(kv_tokens / context_tokens) * engines)::bigint   as fit_by_kv
    from sized
),

final as (
    select
        run_id,
        workload,
        prompt_tokens,
        output_tokens,
        context_tokens,
        kv_tokens,
        engines,
        seq_cap,
        fit_by_kv,
        case
            when not beyond_max_context then least(fit_by_kv, seq_cap::bigint * engines)
        end                                                     as sequences,
        beyond_max_context,
        kv_source_file,
        kv_source_line
    from fitted
)

select * from final

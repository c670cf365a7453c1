-- Every launch beside its plan: what the plan said (launch_plan_rows, made from the launch's own
-- flags with the history of the other launches) and what the launch's log says (launches, runs,
-- run_phases, run_timeline), the error of each in percent of the logged figure, and whether a
-- launch that failed for memory had been foreseen by a plan saying it would not fit.
-- $memory_error_pattern: what an engine's error says when memory ran out.
with plan as (
    select * from launch_plan_rows
),

logged as (
    select
        r.run_id,
        r.spec,
        r.model,
        r.engine,
        r.engine_version,
        l.status,
        l.weights_gib,
        l.kv_cache_gib,
        l.kv_tokens,
        l.ready_s,
        (select sum(t.seconds) from run_timeline as t
          where t.run_id = r.run_id and t.phase = 'gate')                       as gate_s,
        (select max(p.run_s) from run_phases as p where p.run_id = r.run_id)   as run_s,
        coalesce(l.error_type, '') || ' ' || coalesce(l.error_message, '')     as error_text,
        l.kv_source_file,
        l.kv_source_line
    from runs as r
    inner join launches as l on l.run_id = r.run_id
),

joined as (
    select
        logged.run_id,
        logged.spec,
        logged.model,
        logged.engine,
        logged.engine_version,
        logged.status,
        plan.verdict,
        plan.why,
        plan.basis,
        plan.budget_gib,
        plan.reserve_gib,
        plan.planned_weights_gib,
        logged.weights_gib,
        (plan.planned_weights_gib - logged.weights_gib) / logged.weights_gib * 100
                                                                  as weights_err_pct,
        plan.planned_kv_cache_gib,
        logged.kv_cache_gib,
        (plan.planned_kv_cache_gib - logged.kv_cache_gib) / logged.kv_cache_gib * 100
                                                                  as kv_cache_err_pct,
        plan.planned_kv_tokens,
        logged.kv_tokens,
        (plan.planned_kv_tokens - logged.kv_tokens) / logged.kv_tokens * 100
                                                                  as kv_tokens_err_pct,
        plan.planned_concurrency_x,
        plan.planned_ready_s,
        logged.ready_s,
        (plan.planned_ready_s - logged.ready_s) / logged.ready_s * 100
                                                                  as ready_err_pct,
        plan.planned_run_s,
        logged.run_s,
        (plan.planned_run_s - logged.run_s) / logged.run_s * 100
                                                                  as run_err_pct,
        logged.status <> 'ready' and regexp_matches(logged.error_text, $memory_error_pattern)
                                                                  as failed_for_memory,
        logged.kv_source_file                                     as source_file,
        logged.kv_source_line                                     as source_line
    from logged
    inner join plan on plan.run_id = logged.run_id
),

final as (
    select
        *,
        failed_for_memory and verdict = 'does not fit'           as foreseen
    from joined
    order by run_id
)

select * from final

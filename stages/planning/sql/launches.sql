-- Every launch the campaign holds, with what its log says and when its run ended (its last phase):
-- the history plans read (stages/planning/history.py).
select
    r.run_id,
    r.spec,
    r.profile,
    r.model,
    r.engine,
    r.engine_version,
    r.started_at,
    (select max(t.end_at) from run_timeline as t where t.run_id = r.run_id)        as finished_at,
    l.status,
    l.ready_s,
    l.weights_gib,
    l.kv_cache_gib,
    l.kv_tokens,
    l.max_concurrency_x,
    l.error_type,
    l.error_message,
    (select max(p.run_s) from run_phases p where p.run_id = r.run_id)                 as run_s,
    (select sum(t.seconds) from run_timeline t
      where t.run_id = r.run_id and t.phase = 'gate')                                  as gate_s
from runs r
join launches l using (run_id)
where r.imported_kind is distinct from 'results'
order by r.started_at, r.run_id

-- The per-request samples of one side's agents workloads (turn_requests of kind agents), for the
-- intervals of the change: TTFT of the successful requests, TPOT of those whose output did not come
-- in one burst (as agent_runs computes its figures). $run_ids: the side's runs.
select
    q.run_id, q.workload,
    case when q.ok then q.ttft_s end as ttft_s,
    case when q.ok and not coalesce(q.burst, false) then q.tpot_ms end as tpot_ms
from turn_requests as q
where q.kind = 'agents' and q.run_id in (select unnest($run_ids))

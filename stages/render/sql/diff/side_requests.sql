-- The per-request samples of one side's benchmark points, for the intervals of the change.
-- stages/render/diff.py keeps, as bench_points computes its figures, TTFT of the successful
-- requests not served from the prefix cache and TPOT of the successful ones whose output did not
-- come in one burst (side_request_flags.sql; where a side has no invalid_rows table, TTFT of the
-- valid requests). The regex keeps the repeat column where bench_requests has one; without it
-- every point is one repeat. $run_ids: the side's runs.
select columns('^(run_id|point_id|request_idx|workload|concurrency|repeat|ttft_s|tpot_ms|ok|valid)$')
from bench_requests
where run_id in (select unnest($run_ids))

-- The per-request samples of one side's benchmark points, for the intervals of the change.
-- stages/render/diff_sides.py keeps, as bench_points computes its figures, TTFT of the requests that
-- count for the first token and TPOT of those that count per token (bench_requests.counts_for_ttft,
-- counts_for_tpot); a side derived before bench_requests had them is read from its invalid_rows
-- (side_request_flags.sql), and one without invalid_rows keeps TTFT of the valid requests. The
-- regex keeps the repeat and counts columns where bench_requests has them; without repeat every
-- point is one repeat. $run_ids: the side's runs.
select columns('^(run_id|point_id|request_idx|workload|concurrency|repeat|ttft_s|tpot_ms|ok|valid|counts_for_ttft|counts_for_tpot)$')
from bench_requests
where run_id in (select unnest($run_ids))

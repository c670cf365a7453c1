-- Which of one side's requests bench_points leaves out of its TTFT (failed, served from the prefix
-- cache) and of its TPOT (output in one burst), from invalid_rows. $run_ids: the side's runs.
select
    run_id, point_id, request_idx,
    bool_or(reason in ('prefix_cache', 'failed')) as excluded_from_ttft,
    bool_or(reason = 'burst_output')               as excluded_from_tpot
from invalid_rows
where run_id in (select unnest($run_ids))
group by run_id, point_id, request_idx

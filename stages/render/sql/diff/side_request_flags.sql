-- Which of one side's requests bench_points leaves out of its TTFT (failed, served from the prefix
-- cache, a text its tokens cannot spell) and of its TPOT (output in one burst, more tokens
-- than asked), from invalid_rows, for a side whose bench_requests has no counts_for_ttft and
-- counts_for_tpot (a campaign derived before derive published them; stages/render/diff_sides.py reads
-- those where they are). By reason rather than excludes_ttft/excludes_tpot: such a side may be
-- a campaign derived before invalid_rows had those columns. $run_ids: the side's runs.
select
    run_id, point_id, request_idx,
    bool_or(reason in ('prefix_cache', 'failed', 'text_not_output')) as excluded_from_ttft,
    bool_or(reason in ('burst_output', 'output_count'))               as excluded_from_tpot
from invalid_rows
where run_id in (select unnest($run_ids))
group by run_id, point_id, request_idx

-- What each launch's benchmark steps took: a point's or a multi-turn workload's set-up, requests
-- and tail, summed.
select run_id, step, sum(seconds) as seconds
from run_timeline
where step is not null
group by run_id, step
order by run_id, step

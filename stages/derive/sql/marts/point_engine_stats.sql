-- What the engine's own periodic stats lines said while a benchmark point ran: one row per point
-- that has any. A point ran from its result file's `date` (written when the benchmark finished)
-- less its `duration`; a stats line covers the interval before it, so lines logged from the start
-- to one stats interval after the end count (vLLM logs every 10 s by default). vLLM's log times
-- carry no year: the run's start year is used (SGLang's carry their date), and both clocks are
-- taken to be the node's. Each maximum cites the line that holds it.
with points as (
    select
        points.run_id,
        points.point_id,
        try_strptime(points.bench_date, '%Y%m%d-%H%M%S')                     as ended_at,
        points.duration_s
    from stg_bench_points as points
    -- vllm bench serve's `date` (when it finished); another tool's date may mean its start
    where try_strptime(points.bench_date, '%Y%m%d-%H%M%S') is not null
      and points.duration_s is not null and points.tool is null
),

stats as (
    select
        stats.*,
        coalesce(
            try_strptime(stats.log_time, '%Y-%m-%d %H:%M:%S'),
            try_strptime(year(runs.started_at)::varchar || '-' || stats.log_time, '%Y-%m-%d %H:%M:%S')
        )   as logged_at
    from stg_log_stats as stats
    inner join stg_runs as runs on runs.run_id = stats.run_id
),

during as (
    select points.run_id, points.point_id, stats.*
        exclude (run_id)
    from points
    inner join stats
        on stats.run_id = points.run_id
       and stats.logged_at > points.ended_at - to_microseconds((points.duration_s * 1e6)::bigint)
       and stats.logged_at <= points.ended_at + interval '10 seconds'
),

-- Each maximum's line: the first line that holds it (the largest value, then the smallest line).
final as (
    select
        run_id,
        point_id,
        count(*)                                                          as stats_lines,
        max(running_reqs)                                                 as running_reqs_max,
        max(waiting_reqs)                                                 as waiting_reqs_max,
        max(gen_tok_s)                                                    as gen_tok_s_max,
        min(source_file)                                                  as running_source_file,
        arg_max(source_line, [coalesce(running_reqs, -1), -source_line])  as running_source_line,
        min(source_file)                                                  as waiting_source_file,
        arg_max(source_line, [coalesce(waiting_reqs, -1), -source_line])  as waiting_source_line,
        min(source_file)                                                  as gen_source_file,
        arg_max(source_line, [coalesce(gen_tok_s, -1), -source_line])     as gen_source_line
    from during
    group by run_id, point_id
    order by run_id, point_id
)

select * from final

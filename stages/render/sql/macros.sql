-- Table macros the row queries share, created (temporary) on the render stage's connection.
-- section_runs(run_ids, model): every attempt of one model among a Part's runs, with its launch's
-- status and its gate's verdict, oldest first. `spec` is the name the pages give the run
-- (runs.spec_label: its spec, else its model, layout, context and engine); params_spec is its
-- spec in params.yaml, null for a run without one.
create or replace temp macro section_runs(run_ids, model_name) as table
    select
        r.* replace (r.spec_label as spec),
        r.spec                                as params_spec,
        coalesce(l.status, 'unknown')         as status,
        coalesce(g.provisional, false)        as gate_provisional,
        g.run_id is not null                  as gated
    from runs as r
    left join launches as l on l.run_id = r.run_id
    left join gates as g on g.run_id = r.run_id and g.gate = 'niah'
    where list_contains(run_ids, r.run_id) and r.model = model_name
    order by r.started_at, r.run_id;

-- current_runs(profile): the reported attempt (runs.is_current) of each spec on a profile: its
-- run_id, its spec as the pages name it (runs.spec_label) and when it started.
create or replace temp macro current_runs(profile_name) as table
    select r.run_id, r.spec_label as spec, r.started_at
    from runs as r
    where r.profile = profile_name and r.is_current;

-- shown_points(): one row per benchmark point as the pages show it. A repeated point (its rows of
-- bench_points that share run, workload and concurrency) is its first repeat's row, the result
-- file its facts cite, with the figures the charts draw taken across its repeats (point_repeats:
-- the median of each, the sums of completed and sent), and `repeats` with the lowest and highest
-- TTFT and output rate beside them. A point that ran once is its row as it is.
create or replace temp macro shown_points() as table
    select
        p.* replace (
            coalesce(pr.ttft_median_s, p.ttft_median_s)                     as ttft_median_s,
            coalesce(pr.tpot_median_ms, p.tpot_median_ms)                   as tpot_median_ms,
            case when pr.repeats > 1 then 1000.0 / nullif(pr.tpot_median_ms, 0)
                 else p.decode_tok_s_per_user end                          as decode_tok_s_per_user,
            coalesce(pr.output_tok_s, p.output_tok_s)                       as output_tok_s,
            case when pr.repeats > 1 then pr.completed else p.completed end as completed,
            case when pr.repeats > 1 then pr.sent else p.sent end           as sent),
        coalesce(pr.repeats, 1) as repeats,
        pr.ttft_median_min_s, pr.ttft_median_max_s, pr.output_tok_min_s, pr.output_tok_max_s
    from bench_points as p
    left join point_repeats as pr
        on pr.run_id = p.run_id and pr.workload = p.workload and pr.concurrency = p.concurrency
    where p.point_id = coalesce(pr.first_point_id, p.point_id);

-- section_points(run_ids, model): the points (shown_points) of the reported attempt (is_current)
-- of each spec of one model among a Part's runs, with the spec and when its run started. A point
-- another tool ran at a fixed request rate, with no number of users, is not among them: every
-- table and chart of a model's section is by users.
create or replace temp macro section_points(run_ids, model_name) as table
    select p.*, a.spec, a.started_at
    from shown_points() as p
    inner join section_runs(run_ids, model_name) as a on a.run_id = p.run_id
    where a.is_current and p.concurrency is not null;

-- timeline_point(run_ids, model): the one point of a model in a Part (section_points) whose
-- requests the request timeline draws: the one with the most requests whose send times the
-- result file records, then the most users, the earliest run and the smallest workload.
create or replace temp macro timeline_point(run_ids, model_name) as table
    select p.run_id, p.spec, p.point_id, p.workload, p.concurrency
    from section_points(run_ids, model_name) as p
    inner join (
        select run_id, point_id, count(*) as timed
        from bench_requests
        where start_time_s is not null
        group by run_id, point_id
    ) as t on t.run_id = p.run_id and t.point_id = p.point_id
    order by t.timed desc, p.concurrency desc, p.started_at, p.run_id, p.prompt_tokens, p.workload
    limit 1;

-- Table macros the row queries share, created (temporary) on the render stage's connection.
-- section_runs(run_ids, model): every attempt of one model among a Part's runs, with its launch's
-- status and its gate's verdict, oldest first.
create or replace temp macro section_runs(run_ids, model_name) as table
    select
        r.*,
        coalesce(l.status, 'unknown')         as status,
        coalesce(g.provisional, false)        as gate_provisional,
        g.run_id is not null                  as gated
    from runs as r
    left join launches as l on l.run_id = r.run_id
    left join gates as g on g.run_id = r.run_id and g.gate = 'niah'
    where list_contains(run_ids, r.run_id) and r.model = model_name
    order by r.started_at, r.run_id;

-- section_points(run_ids, model): the benchmark points of the reported attempt (is_current) of
-- each spec of one model among a Part's runs, with the spec and when its run started.
create or replace temp macro section_points(run_ids, model_name) as table
    select p.*, a.spec, a.started_at
    from bench_points as p
    inner join section_runs(run_ids, model_name) as a on a.run_id = p.run_id
    where a.is_current;

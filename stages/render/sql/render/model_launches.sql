-- Every launch of one model in a Part, in time order: how it ended, the first error it logged,
-- and whether the launch before it differed (launch_changes).
with attempts as (
    select * from section_runs($run_ids::varchar[], $model)
),

changes as (
    select run_id, count(*) as changes
    from launch_changes
    group by run_id
),

tools as (
    select run_id, string_agg(distinct tool, ', ' order by tool) as tools
    from bench_points
    group by run_id
),

final as (
    select
        a.run_id,
        a.spec,
        a.params_spec,
        a.image,
        a.imported_from,
        a.imported_kind,
        tools.tools,
        a.inferred,
        a.status,
        a.is_current,
        a.gated,
        a.gate_provisional,
        l.error_type,
        l.error_message,
        l.error_worker,
        l.error_source_file is not null            as has_error,
        substr(l.error_source_file, strpos(l.error_source_file, a.run_id || '/') + length(a.run_id) + 1)
                                                   as error_file,
        l.error_source_line                        as error_line,
        lag(a.run_id) over (order by a.started_at, a.run_id) as previous_run_id,
        coalesce(changes.changes, 0) > 0           as changed
    from attempts as a
    left join launches as l on l.run_id = a.run_id
    left join changes on changes.run_id = a.run_id
    left join tools on tools.run_id = a.run_id
    order by a.started_at, a.run_id
)

select * from final

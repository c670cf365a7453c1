-- One launch's status and the line of its server.log that holds its first error (null when it
-- records none there, e.g. a failed launch quoted from launch.out), and its engine (whose blocks of
-- a log tailing several services are quoted), for launch_quote().
with final as (
    select
        l.run_id,
        l.status,
        coalesce(l.error_type, '') as error_type,
        r.engine,
        case
            when ends_with(l.error_source_file, l.run_id || '/server.log') then l.error_source_line
        end as error_line
    from launches as l
    left join runs as r on r.run_id = l.run_id
    where l.run_id = $run_id
)

select * from final

-- The needle probes of a run's gate, each at its line of niah.log: counted when the probe found
-- the needle; a failed probe (no answer to judge) counts as missed, with its reason.
with final as (
    select
        source_file,
        case when ok then 1 else 0 end                 as probe_value,
        'line ' || source_line                         as probe_path,
        ok                                             as probe_used,
        case when not ok then coalesce(failure, 'missed the needle') end as reason
    from gate_probes
    where run_id = $run_id
    order by probe_idx
)

select * from final

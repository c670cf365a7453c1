-- Sequence cap: --max-num-seqs as given, else the engine default from rules.
with source as (
    select *
    from launches
    where run_id = $run_id
),

final as (
    select
        seq_cap as value,
        'sequences' as unit,
        run_id as run_id,
        source_file as source_file,
        source_line as source_line
    from source
)

select * from final

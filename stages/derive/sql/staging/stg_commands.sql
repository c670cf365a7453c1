-- The engine command of each run, as found in cmd.sh.
with source as (
    select * from raw.raw_commands
),

final as (
    select
        run_id::varchar               as run_id,
        wrapper::varchar              as wrapper,
        image::varchar                as image,
        model_path::varchar           as model_path,
        tp::integer                   as tp,
        dp::integer                   as dp,
        pp::integer                   as pp,
        dcp::integer                  as dcp,
        pcp::integer                  as pcp,
        expert_parallel::boolean      as expert_parallel,
        max_model_len::bigint         as max_model_len,
        max_num_seqs::integer         as max_num_seqs,
        kv_cache_dtype::varchar       as kv_cache_dtype,
        prefix_caching::boolean       as prefix_caching,
        command::varchar              as command,
        source_file::varchar          as source_file,
        source_line::integer          as source_line
    from source
)

select * from final

-- One row per run: how its engine launch went.
-- status: launch.out `status=` (its last such line), else ready when the engine log says it was
-- ready, else failed; 'not launched' for a run that is benchmark results alone (imported with
-- `campaign import --results`: no engine command or log came with them). kv_tokens is the engine's own startup figure for one engine: the KV cache
-- size line, else blocks x block size (the block size logged, else --block-size, else vLLM's
-- default of 16), else SGLang max_total_num_tokens, else launch.out engine_kv_tokens.
-- seq_cap: --max-num-seqs / --max-running-requests as given, else the figure SGLang logs, else
-- the engine's own default for the run's engine, version and profile device (param_seq_caps, from
-- stages/derive/sql/intermediate/engine_defaults.yaml; seq_cap_default_source names its source), else
-- default_max_num_seqs of the run's own profile (param_rules). The version: meta.json's, else the
-- one the engine logged, else the image tag's. Error columns quote the first error the log records.
-- Per-value sources: ready_source_* is the launch.out ready_s line; seq_cap_source_* the cmd.sh
-- line of the flag or the log line of the figure, null when a default applied. A failed launch
-- whose log records no error quotes launch.out's error line (error_type 'Slurm' when Slurm ended it).
with run_rows as (
    select * from stg_runs
),

commands as (
    select * from stg_commands
    qualify row_number() over (partition by run_id order by source_file, source_line) = 1
),

launch_out as (
    select * from stg_launch_out
    qualify row_number() over (
        partition by run_id, launch_key order by source_file desc, source_line desc
    ) = 1
),

facts as (
    select * from stg_log_facts
    qualify row_number() over (partition by run_id, fact order by source_file, source_line) = 1
),

block_size_flags as (
    select
        run_id,
        try_cast(flag_value as bigint) as block_size
    from stg_command_flags
    where flag = '--block-size'
    qualify row_number() over (partition by run_id order by flag_position desc) = 1
),

status_line as (
    select run_id, lower(launch_value) as status, source_file, source_line
    from launch_out
    where launch_key = 'status'
),

ready_s_line as (
    select run_id, try_cast(launch_value as double) as ready_s, source_file, source_line
    from launch_out
    where launch_key = 'ready_s'
),

kv_out_line as (
    select run_id, try_cast(replace(launch_value, ',', '') as bigint) as kv_tokens, source_file, source_line
    from launch_out
    where launch_key = 'engine_kv_tokens'
),

kv_candidates as (
    select run_id, 1 as preference, value_num::bigint as kv_tokens, source_file, source_line
    from facts
    where fact = 'kv_tokens' and value_num is not null
    union all
    select
        blocks.run_id,
        2 as preference,
        (blocks.value_num * coalesce(size_fact.value_num, size_flag.block_size, 16))::bigint as kv_tokens,
        blocks.source_file,
        blocks.source_line
    from facts as blocks
    left join facts as size_fact
        on size_fact.run_id = blocks.run_id and size_fact.fact = 'block_size'
    left join block_size_flags as size_flag
        on size_flag.run_id = blocks.run_id
    where blocks.fact = 'kv_blocks' and blocks.value_num is not null
    union all
    select run_id, 3 as preference, value_num::bigint as kv_tokens, source_file, source_line
    from facts
    where fact = 'max_total_num_tokens' and value_num is not null
    union all
    select run_id, 4 as preference, kv_tokens, source_file, source_line
    from kv_out_line
    where kv_tokens is not null
),

kv as (
    select * from kv_candidates
    qualify row_number() over (partition by run_id order by preference) = 1
),

fact_values as (
    select
        run_id,
        max(value_num) filter (where fact = 'kv_memory_gib')        as kv_cache_gib,
        max(value_num) filter (where fact = 'weights_gib')          as weights_gib,
        max(value_num) filter (where fact = 'load_s')               as load_s,
        max(value_num) filter (where fact = 'init_s')               as init_s,
        max(value_num) filter (where fact = 'context_len')          as context_len,
        max(value_num) filter (where fact = 'max_running_requests') as max_running_requests,
        max(value_text) filter (where fact = 'moe_backend')         as moe_backend,
        max(value_text) filter (where fact = 'attention_backend')   as attention_backend,
        max(value_text) filter (where fact = 'linear_kernel')       as linear_kernel,
        max(value_num) filter (where fact = 'max_concurrency_x')    as max_concurrency_x,
        bool_or(fact = 'ready')                                     as log_ready
    from facts
    group by run_id
),

engine_versions as (
    select
        run_rows.run_id,
        run_rows.engine,
        coalesce(
            nullif(regexp_extract(run_rows.engine_version, '\d+(\.\d+)+'), ''),
            nullif(regexp_extract(logged.value_text, '\d+(\.\d+)+'), ''),
            nullif(regexp_extract(run_rows.image, ':v?(\d+(\.\d+)+)', 1), '')
        )                                                   as version
    from run_rows
    left join facts as logged
        on logged.run_id = run_rows.run_id and logged.fact = 'engine_version'
    qualify row_number() over (partition by run_rows.run_id order by logged.source_file, logged.source_line) = 1
),

engine_default as (
    select
        versions.run_id,
        caps.cap,
        caps.per_tp,
        caps.source
    from engine_versions as versions
    inner join int_run_params as run_params on run_params.run_id = versions.run_id
    inner join param_seq_caps as caps
        on caps.profile = run_params.params_profile
       and caps.engine = versions.engine
       and (caps.version_from is null
            or list_transform(string_split(versions.version, '.'), lambda p: p::integer) >= caps.version_from)
       and (caps.version_before is null
            or list_transform(string_split(versions.version, '.'), lambda p: p::integer) < caps.version_before)
    where versions.version is not null
    qualify row_number() over (partition by versions.run_id order by caps.position) = 1
),

seq_cap_flags as (
    select run_id, source_file, source_line
    from stg_command_flags
    where flag in ('--max-num-seqs', '--max-running-requests')
    qualify row_number() over (partition by run_id order by flag_position desc) = 1
),

seq_cap_fact as (
    select run_id, source_file, source_line
    from facts
    where fact = 'max_running_requests' and value_num is not null
),

ready_fact as (
    select run_id, source_file, source_line
    from facts
    where fact = 'ready'
),

-- A launch error is the first error of a log that never shows the engine ready. In a log that
-- does, an error after readiness (EngineDeadError hours later) or before it (a launch that failed
-- and was started again in the same log) is not why this launch failed: run_events has it.
first_error as (
    select errors.run_id, errors.detail, errors.value_text, errors.worker,
           errors.source_file, errors.source_line
    from facts as errors
    left join facts as ready
        on ready.run_id = errors.run_id and ready.fact = 'ready'
        and ready.source_file = errors.source_file
    where errors.fact = 'error'
      and ready.run_id is null
),

-- A launch that failed with no error in its log (not ready in time) says why in launch.out's
-- `error=` line (its last one). A job Slurm ended (a time limit, a node failure) is quoted from
-- that line even where the engine logged an error as it was killed: Slurm's reason is the cause.
launch_error as (
    select
        stg_launch_out.run_id,
        case when launch_value like 'Slurm %' then 'Slurm' else 'launch' end as detail,
        launch_value                                                          as value_text,
        cast(null as varchar)                                                 as worker,
        stg_launch_out.source_file,
        stg_launch_out.source_line
    from stg_launch_out
    inner join status_line
        on status_line.run_id = stg_launch_out.run_id and status_line.status = 'failed'
    where launch_key = 'error' and launch_value <> ''
    qualify row_number() over (partition by stg_launch_out.run_id order by stg_launch_out.source_line desc) = 1
),

launch_errors as (
    select * from launch_error
    where detail = 'Slurm'
    union all
    select * from first_error
    where run_id not in (select run_id from launch_error where detail = 'Slurm')
    union all
    select * from launch_error
    where detail <> 'Slurm' and run_id not in (select run_id from first_error)
),

joined as (
    select
        run_rows.run_id,
        case
            when run_rows.imported_kind = 'results' then 'not launched'
            else coalesce(
                status_line.status,
                case when coalesce(fact_values.log_ready, false) then 'ready' else 'failed' end)
        end                                                 as status,
        ready_s_line.ready_s,
        kv.kv_tokens,
        fact_values.kv_cache_gib,
        fact_values.weights_gib,
        fact_values.load_s,
        fact_values.init_s,
        coalesce(commands.max_model_len, fact_values.context_len::bigint) as max_model_len,
        commands.max_num_seqs,
        coalesce(
            commands.max_num_seqs,
            fact_values.max_running_requests::integer,
            engine_default.cap * case when engine_default.per_tp then coalesce(commands.tp, 1) else 1 end,
            rules.default_max_num_seqs
        )                                                   as seq_cap,
        case
            when commands.max_num_seqs is null and fact_values.max_running_requests is null
            then engine_default.source
        end                                                 as seq_cap_default_source,
        coalesce(commands.dp, 1)                            as engines,
        commands.tp,
        fact_values.moe_backend,
        fact_values.attention_backend,
        fact_values.linear_kernel,
        fact_values.max_concurrency_x,
        first_error.detail                                  as error_type,
        first_error.value_text                              as error_message,
        first_error.worker                                  as error_worker,
        coalesce(commands.kv_cache_dtype, 'auto')            as kv_cache_dtype,
        commands.command,
        kv.source_file                                      as kv_source_file,
        kv.source_line                                      as kv_source_line,
        ready_s_line.source_file                            as ready_source_file,
        ready_s_line.source_line                            as ready_source_line,
        case
            when commands.max_num_seqs is not null then seq_cap_flags.source_file
            when fact_values.max_running_requests is not null then seq_cap_fact.source_file
        end                                                 as seq_cap_source_file,
        case
            when commands.max_num_seqs is not null then seq_cap_flags.source_line
            when fact_values.max_running_requests is not null then seq_cap_fact.source_line
        end                                                 as seq_cap_source_line,
        first_error.source_file                             as error_source_file,
        first_error.source_line                             as error_source_line,
        coalesce(
            status_line.source_file, ready_fact.source_file, first_error.source_file,
            commands.source_file, run_rows.source_file
        )                                                   as source_file,
        case
            when status_line.source_file is not null then status_line.source_line
            when ready_fact.source_file is not null then ready_fact.source_line
            when first_error.source_file is not null then first_error.source_line
            when commands.source_file is not null then commands.source_line
            else run_rows.source_line
        end                                                 as source_line
    from run_rows
    left join commands     on commands.run_id = run_rows.run_id
    left join status_line  on status_line.run_id = run_rows.run_id
    left join ready_s_line on ready_s_line.run_id = run_rows.run_id
    left join kv           on kv.run_id = run_rows.run_id
    left join fact_values  on fact_values.run_id = run_rows.run_id
    left join ready_fact   on ready_fact.run_id = run_rows.run_id
    left join seq_cap_flags on seq_cap_flags.run_id = run_rows.run_id
    left join seq_cap_fact on seq_cap_fact.run_id = run_rows.run_id
    left join engine_default on engine_default.run_id = run_rows.run_id
    left join launch_errors as first_error on first_error.run_id = run_rows.run_id
    left join int_run_params as run_params on run_params.run_id = run_rows.run_id
    join param_rules as rules on rules.profile is not distinct from run_params.params_profile
),

final as (
    select
        run_id,
        status,
        ready_s,
        kv_tokens,
        kv_cache_gib,
        weights_gib,
        load_s,
        init_s,
        max_model_len,
        max_num_seqs,
        seq_cap::integer        as seq_cap,
        engines::integer        as engines,
        tp,
        moe_backend,
        attention_backend,
        error_type,
        error_message,
        error_worker,
        kv_cache_dtype,
        command,
        kv_source_file,
        kv_source_line,
        ready_source_file,
        ready_source_line,
        seq_cap_source_file,
        seq_cap_source_line,
        seq_cap_default_source,
        error_source_file,
        error_source_line,
        source_file,
        source_line,
        linear_kernel,
        max_concurrency_x
    from joined
)

select * from final

-- One row per GPU sampler file (gpu/<point_id>.csv): the GPU power and energy of one benchmark
-- point (or multi-turn workload) of a run with a GPU set, over the point's window.
-- Per GPU (point_gpu_energy): the trapezoid integral of its power over the window, and the mean of
-- its samples inside the window. energy_j is the sum over the GPUs of the set, valid only where
-- every GPU's is (energy_valid; else null, and energy_problem says why). avg_power_total_w sums
-- the GPUs' mean power, null unless every GPU of the set has samples inside the window;
-- avg_power_per_gpu_w is the mean over the GPUs that have. j_per_output_token: energy_j over the
-- output tokens of the point's result file (bench/<point_id>.json), null without one.
-- The window is the point's requests window where the client timed it (window_from, see
-- int_gpu_sampler_files); sampler_window_s is the sampler's own, the client's set-up included, and
-- bench_duration_s the benchmark's own duration (its result file). idle_power_total_w: the sum of
-- the GPUs' median power before the window, null unless every GPU of the set has such samples.
-- Sums and means of doubles name their order (gpu_index): DuckDB's threads may otherwise add them
-- in another order from one build to the next, and a total on a half (469.35) rounds either way.
with gpus as (
    select * from point_gpu_energy
),

files as (
    select * from int_gpu_sampler_files
),

per_point as (
    select
        run_id,
        point_id,
        count(*)                                                         as gpus_in_set,
        count(*) filter (where samples > 0)                              as gpus_sampled,
        count(*) filter (where samples_in_window > 0)                    as gpus_sampled_in_window,
        sum(samples)                                                     as samples,
        avg(avg_power_w order by gpu_index)                              as avg_power_per_gpu_w,
        sum(idle_power_w order by gpu_index)                             as idle_power_sum_w,
        count(*) filter (where idle_samples > 0)                         as gpus_idle_sampled,
        sum(idle_samples)                                                as idle_samples,
        sum(avg_power_w order by gpu_index)                              as avg_power_sum_w,
        max(max_gap_s)                                                   as max_gap_s,
        sum(energy_j order by gpu_index)                                 as energy_sum_j,
        count(*) filter (where problem is not null)                      as gpu_problems,
        string_agg(problem, '; ' order by gpu_index)                     as energy_problem,
        min(source_line)                                                 as first_sample_line,
        max(last_sample_line)                                            as last_sample_line
    from gpus
    group by run_id, point_id
),

final as (
    select
        files.run_id,
        files.point_id,
        points.workload,
        points.concurrency,
        points.repeat,
        files.gpus,
        coalesce(per_point.gpus_in_set, 0)                               as gpus_in_set,
        coalesce(per_point.gpus_sampled, 0)                              as gpus_sampled,
        coalesce(per_point.samples, 0)                                   as samples,
        files.window_start,
        files.window_end,
        files.window_end_epoch_s - files.window_start_epoch_s            as window_s,
        per_point.avg_power_per_gpu_w,
        case when per_point.gpus_sampled_in_window = per_point.gpus_in_set
             then per_point.avg_power_sum_w end                          as avg_power_total_w,
        per_point.max_gap_s,
        coalesce(per_point.gpu_problems = 0, false)                      as energy_valid,
        case when per_point.gpu_problems = 0 then per_point.energy_sum_j end as energy_j,
        points.total_output_tokens                                       as output_tokens,
        case when per_point.gpu_problems = 0
             then per_point.energy_sum_j / nullif(points.total_output_tokens, 0) end
                                                                         as j_per_output_token,
        case
            when per_point.gpus_in_set is null then 'the file names no GPU set'
            else per_point.energy_problem
        end                                                              as energy_problem,
        files.sampler_error,
        files.source_file,
        coalesce(per_point.first_sample_line, files.sampler_start_line)  as source_line,
        per_point.last_sample_line,
        files.window_start_line,
        files.window_end_line,
        points.source_file                                               as result_file,
        points.source_line                                               as result_line,
        coalesce(json_extract_string(points.value_lines, '$.total_output_tokens')::integer,
                 points.source_line)                                     as output_tokens_line,
        coalesce(json_extract_string(points.value_lines, '$.duration_s')::integer,
                 points.source_line)                                     as bench_duration_line,
        files.window_from,
        files.sampler_end_epoch_s - files.sampler_start_epoch_s          as sampler_window_s,
        files.bench_duration_s,
        case when per_point.gpus_idle_sampled = per_point.gpus_in_set
             then per_point.idle_power_sum_w end                         as idle_power_total_w,
        coalesce(per_point.idle_samples, 0)                              as idle_samples,
        files.window_source_file
    from files
    left join per_point
        on per_point.run_id = files.run_id and per_point.point_id = files.point_id
    left join stg_bench_points as points
        on points.run_id = files.run_id and points.point_id = files.point_id
)

select * from final

-- One row per GPU of the set each GPU sampler file (gpu/<point_id>.csv) names in its `# gpus=`
-- line: that GPU's samples over the point's window (int_gpu_sampler_files).
-- energy_j: the trapezoid integral of power over the window. Samples are joined by straight
--   lines; a pair of samples that straddles a window edge counts only its part inside (the power
--   at the edge read off the line). Where the first sample comes after the window's start, its
--   power is held back to the start; where the last comes before the end, held to the end
--   (within $energy_max_gap_s, or the energy is not valid).
-- avg_power_w: the plain mean of the GPU's samples taken inside the window.
-- idle_power_w: the median of the GPU's samples taken before the window (the benchmark client
--   loading its tokenizer and building prompts while the engine waits); idle_samples: how many.
-- source_line, last_sample_line: the GPU's first and last sample line of the file.
-- max_gap_s: the longest time between two of the GPU's consecutive samples that reach into the
--   window; start_miss_s / end_miss_s: how long after the window's start the first sample came,
--   and how long before its end the last one (zero when a sample lies at or beyond the edge).
-- problem: why the GPU's energy is not valid (no samples, a gap, samples not covering the window
--   to within $energy_max_gap_s), else null.
with files as (
    select * from int_gpu_sampler_files
),

gpu_set as (
    select distinct
        run_id,
        point_id,
        try_cast(trim(gpu) as integer)                                  as gpu_index
    from (select run_id, point_id, unnest(string_split(gpus, ',')) as gpu from files)
    where try_cast(trim(gpu) as integer) is not null
),

samples as (
    select
        samples.run_id,
        samples.point_id,
        samples.gpu_index,
        epoch_us(samples.sampled_at) / 1e6                               as t,
        samples.power_w                                                  as p,
        samples.source_line,
        lag(epoch_us(samples.sampled_at) / 1e6) over by_time             as t0,
        lag(samples.power_w) over by_time                                as p0,
        files.window_start_epoch_s                                       as ws,
        files.window_end_epoch_s                                         as we
    from stg_gpu_samples as samples
    join files
        on files.run_id = samples.run_id and files.point_id = samples.point_id
    where samples.power_w is not null and samples.sampled_at is not null
    window by_time as (partition by samples.run_id, samples.point_id, samples.gpu_index
                       order by samples.sampled_at, samples.source_line)
),

pieces as (
    select
        *,
        greatest(t0, ws)                                                 as a,
        least(t, we)                                                     as b
    from samples
),

areas as (
    select
        *,
        case
            when t0 is not null and t > t0 and b > a
            then ((p0 + (p - p0) * (a - t0) / (t - t0)) + (p0 + (p - p0) * (b - t0) / (t - t0)))
                 / 2.0 * (b - a)
            else 0.0
        end                                                              as area_j,
        case when t0 is not null and t > ws and t0 < we then t - t0 end  as gap_s
    from pieces
),

per_gpu as (
    select
        run_id,
        point_id,
        gpu_index,
        count(*)                                                         as samples,
        count(*) filter (where t >= ws and t <= we)                      as samples_in_window,
        min(t)                                                           as first_t,
        max(t)                                                           as last_t,
        arg_min(p, t)                                                    as first_p,
        arg_max(p, t)                                                    as last_p,
        sum(area_j order by t, source_line)                              as area_j,
        max(gap_s)                                                       as max_gap_s,
        avg(p order by t, source_line) filter (where t >= ws and t <= we) as avg_power_w,
        median(p) filter (where t < ws)                                  as idle_power_w,
        count(*) filter (where t < ws)                                   as idle_samples,
        min(source_line)                                                 as first_sample_line,
        max(source_line)                                                 as last_sample_line,
        any_value(ws)                                                    as ws,
        any_value(we)                                                    as we
    from areas
    group by run_id, point_id, gpu_index
),

joined as (
    select
        gpu_set.run_id,
        gpu_set.point_id,
        gpu_set.gpu_index,
        files.source_file,
        coalesce(per_gpu.samples, 0)                                     as samples,
        coalesce(per_gpu.samples_in_window, 0)                           as samples_in_window,
        per_gpu.avg_power_w,
        per_gpu.idle_power_w,
        coalesce(per_gpu.idle_samples, 0)                                as idle_samples,
        per_gpu.max_gap_s,
        greatest(per_gpu.first_t - files.window_start_epoch_s, 0)        as start_miss_s,
        greatest(files.window_end_epoch_s - per_gpu.last_t, 0)           as end_miss_s,
        per_gpu.area_j
          + case when per_gpu.first_t > files.window_start_epoch_s
                 then per_gpu.first_p * (least(per_gpu.first_t, files.window_end_epoch_s)
                                         - files.window_start_epoch_s) else 0 end
          + case when per_gpu.last_t < files.window_end_epoch_s
                 then per_gpu.last_p * (files.window_end_epoch_s
                                        - greatest(per_gpu.last_t, files.window_start_epoch_s)) else 0 end
                                                                         as integral_j,
        per_gpu.first_sample_line,
        per_gpu.last_sample_line,
        files.window_start_epoch_s,
        files.window_end_epoch_s
    from gpu_set
    join files
        on files.run_id = gpu_set.run_id and files.point_id = gpu_set.point_id
    left join per_gpu
        on per_gpu.run_id = gpu_set.run_id
       and per_gpu.point_id = gpu_set.point_id
       and per_gpu.gpu_index = gpu_set.gpu_index
),

judged as (
    select
        *,
        case
            when samples = 0 then 'GPU ' || gpu_index || ' has no samples'
            when window_start_epoch_s is null or window_end_epoch_s is null
                 or window_end_epoch_s < window_start_epoch_s then 'the point has no window'
            when cast($energy_max_gap_s as double) is null then 'no energy.max_gap_s setting'
            when start_miss_s > cast($energy_max_gap_s as double)
                then 'GPU ' || gpu_index || ': first sample ' || round(start_miss_s, 3) || ' s after the window''s start'
            when end_miss_s > cast($energy_max_gap_s as double)
                then 'GPU ' || gpu_index || ': last sample ' || round(end_miss_s, 3) || ' s before the window''s end'
            when max_gap_s > cast($energy_max_gap_s as double)
                then 'GPU ' || gpu_index || ': samples ' || round(max_gap_s, 3) || ' s apart'
        end                                                              as problem
    from joined
),

final as (
    select
        run_id,
        point_id,
        gpu_index,
        source_file,
        samples,
        samples_in_window,
        avg_power_w,
        max_gap_s,
        start_miss_s,
        end_miss_s,
        problem,
        case when problem is null then integral_j end                    as energy_j,
        first_sample_line                                                as source_line,
        last_sample_line,
        idle_power_w,
        idle_samples
    from judged
)

select * from final

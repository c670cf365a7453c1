-- Raw tables written by the ingest stage. One row per thing found in a raw run folder.
-- Every row carries the file it came from (path relative to the project root, forward slashes)
-- and the 1-based line of that file (1 for whole-file JSON). This file is the contract between
-- ingest (which creates and fills these tables) and the staging models of derive (which read them).
-- The section headers below (a line of dashes, then the section's name) group the tables for
-- ingest (stages/core/raw_schema.py reads them): the run tables (folders, run files, ingest records) are
-- dropped and made again when their columns change here; seals are kept; node probes are the node
-- ingest's.

-- ---------------------------------------------------------------- folders

-- One row per ingested run folder; drives incremental ingest.
create table if not exists raw_folders (
    run_id        varchar primary key,
    folder        varchar not null,        -- data/runs/<run_id>
    fingerprint   varchar not null,        -- hash of (name, size, mtime_ns, ctime_ns, inode) of every file in it
    files         integer not null,
    bytes         bigint  not null,
    ingested_at   timestamptz not null
);

-- ---------------------------------------------------------------- run files
-- What a run folder holds, one row per thing found in its files.

-- meta.json, flattened; spec_json keeps the whole spec. Absent folders get a row recovered from
-- the run id, cmd.sh and the log (recovered = true; raw_run_inferred names the line of each value
-- read that way), with the profile and spec of import.json where `campaign import` brought it in.
create table if not exists raw_runs (
    run_id         varchar not null,
    spec           varchar,                -- key in params `specs`
    profile        varchar,
    model          varchar,                -- model short name (first run-id field)
    layout         varchar,
    ctx_label      varchar,                -- e.g. 4k, 1024k
    engine         varchar,                -- vllm | sglang
    engine_version varchar,
    image          varchar,
    image_digest   varchar,
    executor       varchar,                -- local | docker
    gpus           varchar,                -- e.g. "0,1,2,3" or null
    git_sha        varchar,
    params_hash    varchar,
    started_at     timestamptz,
    finished_at    timestamptz,
    schema_version integer,
    recovered      boolean not null,       -- true when meta.json was missing or unreadable
    spec_json      varchar,
    source_file    varchar not null,
    source_line    integer not null,
    gpu_count      integer,                -- GPUs the run took: meta.json's gpus counted, or inferred
    imported_from  varchar,                -- import.json: the folder `campaign import` copied
    imported_at    timestamptz,
    imported_by    varchar,
    imported_kind  varchar                 -- import.json kind: run folder | results (a bench/ folder alone)
);

-- The engine profiler's trace of a profiled point (profile/<point_id>...pt.trace.json.gz): its GPU
-- kernel time (a CPU engine's: its top-level operators) split by kind, one row per kind and file.
create table if not exists raw_profile_kinds (
    run_id      varchar not null,
    point_id    varchar not null,
    counted     varchar,                   -- gpu_kernels | cpu_ops
    kind        varchar not null,          -- collective | gemm | attention | moe | memcpy | other
    events      integer not null,
    total_us    double  not null,
    share_pct   double  not null,
    window_us   double,                    -- first counted event's start to the last one's end
    top_json    varchar,                   -- JSON [{name, events, total_us, event_index}]: the kind's longest-running names
    source_file varchar not null,
    source_line integer not null
);

-- What meta.json would have said, read from another file of a folder that has none: one row per
-- value (field is the raw_runs column), with how it was read and the line it came from.
create table if not exists raw_run_inferred (
    run_id      varchar not null,
    field       varchar not null,          -- image | engine_version | gpus | gpu_count | max_model_len
    value       varchar not null,
    how         varchar not null,          -- what was read, e.g. the device list of docker run --gpus
    source_file varchar not null,
    source_line integer not null
);

-- cmd.sh: the engine command found inside any wrapper.
create table if not exists raw_commands (
    run_id         varchar not null,
    wrapper        varchar,                -- docker | none | ...
    image          varchar,
    model_path     varchar,
    tp             integer, dp integer, pp integer, dcp integer, pcp integer,
    expert_parallel boolean,
    max_model_len  bigint,
    max_num_seqs   integer,                -- vLLM --max-num-seqs or SGLang --max-running-requests
    kv_cache_dtype varchar,
    prefix_caching boolean,                -- null when not stated on the command line
    command        varchar not null,       -- the engine command line, whitespace-normalised
    source_file    varchar not null,
    source_line    integer not null
);

-- Every flag of the engine command as key and value (value null for a bare switch).
create table if not exists raw_command_flags (
    run_id      varchar not null,
    position    integer not null,
    flag        varchar not null,          -- as written, e.g. --max-num-seqs
    value       varchar,
    source_file varchar not null,
    source_line integer not null
);

-- launch.out key=value lines.
create table if not exists raw_launch_out (
    run_id      varchar not null,
    key         varchar not null,
    value       varchar,
    source_file varchar not null,
    source_line integer not null
);

-- Single facts read from an engine log. fact names:
--   engine_version, kv_tokens, kv_blocks, block_size, max_concurrency_x, max_concurrency_len,
--   weights_gib, load_s, kv_memory_gib, no_kv_memory, init_s, compile_s, ready,
--   moe_backend, attention_backend, linear_kernel, kv_scale, max_total_num_tokens,
--   max_running_requests, context_len, chunked_prefill_size, max_prefill_tokens,
--   kv_allocated_tokens (SGLang `KV Cache is allocated … #tokens`, one per pool and rank), error
-- value_num holds numbers (tokens, GiB, seconds), value_text text (version, backend names);
-- for `error`: value_text = message, detail = exception type, worker = the process tag.
create table if not exists raw_log_facts (
    run_id      varchar not null,
    fact        varchar not null,
    value_num   double,
    value_text  varchar,
    detail      varchar,
    worker      varchar,
    log_time    varchar,                   -- the line's own timestamp as written, if any
    excerpt     varchar not null,          -- the line with its prefixes, as written (max 500 chars)
    source_file varchar not null,
    source_line integer not null
);

-- Periodic engine stats (vLLM "Engine 000: Avg prompt throughput ..." and SGLang batch lines).
create table if not exists raw_log_stats (
    run_id          varchar not null,
    engine_idx      integer,
    kind            varchar not null,      -- vllm_stats | sglang_prefill | sglang_decode
    log_time        varchar,
    prompt_tok_s    double,
    gen_tok_s       double,
    running_reqs    integer,
    waiting_reqs    integer,
    kv_usage_pct    double,
    prefix_hit_pct  double,
    new_tokens      bigint,                -- SGLang prefill #new-token
    cached_tokens   bigint,                -- SGLang prefill #cached-token
    source_file     varchar not null,
    source_line     integer not null
);

-- niah.log: one row per probe, and the GATE line.
create table if not exists raw_gate_probes (
    run_id        varchar not null,
    probe_idx     integer not null,        -- 0-based order in the file
    needle_key    varchar,
    depth         double,
    prompt_tokens bigint,
    ok            boolean,
    latency_s     double,
    answer        varchar,                 -- the text after the reasoning block
    failure       varchar,                 -- why the probe got no answer to judge (timeout, HTTP error)
    reasoning_tokens bigint,               -- length of the model's reasoning block
    source_file   varchar not null,
    source_line   integer not null
);
create table if not exists raw_gates (
    run_id      varchar not null,
    gate        varchar not null,          -- niah
    score       double,
    source_file varchar not null,
    source_line integer not null
);

-- One benchmark result file (vllm bench serve --save-result, SGLang bench_serving line).
-- point_id = file stem (e.g. long__c04). workload and concurrency come from --metadata keys when
-- present, else from the file name, else max_concurrency.
create table if not exists raw_bench_points (
    run_id               varchar not null,
    point_id             varchar not null,
    workload             varchar,
    concurrency          integer,
    repeat               integer,          -- which run of the point, from one (1 when not repeated)
    backend              varchar,
    date                 varchar,
    model_id             varchar,
    num_prompts          integer,
    request_rate         double,           -- 'inf' / Infinity -> +inf
    max_concurrency      integer,
    duration_s           double,
    completed            integer,
    failed               integer,
    total_input_tokens   bigint,
    total_output_tokens  bigint,
    request_throughput   double,
    output_throughput    double,
    total_token_throughput double,
    mean_ttft_ms double, median_ttft_ms double, p90_ttft_ms double, p99_ttft_ms double,
    mean_tpot_ms double, median_tpot_ms double, p90_tpot_ms double, p99_tpot_ms double,
    mean_itl_ms double,  median_itl_ms double,
    mean_e2el_ms double, median_e2el_ms double,
    metadata_json        varchar,          -- every other top-level scalar key
    source_file          varchar not null,
    source_line          integer not null,
    tool                 varchar,          -- another tool's file (parsers/tools/): aiperf, guidellm, ...
    tool_version         varchar,
    summary_paths        varchar,          -- JSON {column: where in the file the tool's summary gives it}
    value_lines          varchar           -- JSON {column: line}: of an object printed over several
                                           -- lines, the line of each value not on its first line
);

-- Per-request rows of --save-detailed (arrays zipped by index).
create table if not exists raw_bench_requests (
    run_id         varchar not null,
    point_id       varchar not null,
    request_idx    integer not null,
    input_tokens   bigint,
    output_tokens  bigint,
    ttft_s         double,
    latency_s      double,
    itl_count      integer,
    itl_sum_s      double,
    start_time_s   double,
    queue_time_s   double,
    error          varchar,
    generated_text varchar,
    source_file    varchar not null,
    source_line    integer not null,
    tpot_ms        double,                 -- the request's time per output token as another tool recorded it
    record_path    varchar,                -- JSON path of the request's record in the file (null: the line)
    field_paths    varchar                 -- JSON {column: path inside the record}
);

-- /metrics snapshots: <point_id>.metrics.before.txt / .after.txt
create table if not exists raw_metrics (
    run_id      varchar not null,
    point_id    varchar not null,
    phase       varchar not null,          -- before | after
    name        varchar not null,          -- sample name as exposed (e.g. vllm:prefix_cache_hits_total)
    labels      varchar,                   -- the label set as written, without braces
    value       double,
    source_file varchar not null,
    source_line integer not null
);

-- Multi-turn workloads (ramp.log, agents.<workload>.jsonl): one row per workload line, with the
-- figures of its done line (null when the run stopped before the workload finished).
create table if not exists raw_turn_workloads (
    run_id        varchar not null,
    workload      varchar not null,
    kind          varchar not null,        -- ramp | agents
    sessions      integer not null,
    turns         integer not null,
    output_tokens integer not null,        -- asked for per request
    seed          bigint,
    params_json   varchar,                 -- the workload's params as given
    started_at    timestamptz,
    done_requests integer,
    done_failed   integer,
    done_wall_s   double,
    source_file   varchar not null,
    source_line   integer not null         -- the workload line
);

-- One row per request line of a multi-turn workload, in the order the requests finished.
create table if not exists raw_turn_requests (
    run_id        varchar not null,
    workload      varchar not null,
    kind          varchar not null,
    point_id      varchar not null,        -- <workload>__tNN (ramp turn) or <workload>__sNN (sessions)
    session       integer not null,        -- 0-based
    turn          integer not null,        -- 1-based
    request_idx   integer not null,        -- 0-based, unique within the workload
    target_tokens bigint,                  -- prompt size the client aimed for
    input_tokens  bigint,                  -- prompt size the server reported
    output_tokens bigint,
    ttft_s        double,
    latency_s     double,
    max_itl_s     double,                  -- longest gap between two streamed chunks
    started_s     double,                  -- send time, seconds after the workload line
    needle_ok     boolean,                 -- ramp: the needle of turn one was in the answer
    answer        varchar,                 -- ramp: the generated text, cut to its first characters
    error         varchar,                 -- empty when the request succeeded
    source_file   varchar not null,
    source_line   integer not null
);

-- The `# key=value` lines of the sampler files of a benchmark point, one row a line; sampler
-- says whose. 'gpu': gpu/<point_id>.csv, the GPU sampler's file (a run with a GPU set); keys:
-- point, gpus, interval_ms, clock, command before the samples; window_start, window_end (the
-- point's window, ISO UTC), requests_start, requests_end, sampler_exit, sampler_error, stderr
-- after. 'metrics': bench/<point_id>.metrics-series.txt, the engine's /metrics series; keys:
-- point, url, interval_ms, clock before the samples; requests_start, requests_end (epoch
-- seconds), samples, sampler_exit after them.
create table if not exists raw_sampler_settings (
    run_id      varchar not null,
    point_id    varchar not null,          -- the file's name without its suffix
    sampler     varchar not null,          -- gpu or metrics
    key         varchar not null,
    value       varchar,
    source_file varchar not null,
    source_line integer not null
);

-- One row per sample line of a GPU sampler file: one GPU at one time, as nvidia-smi printed it.
create table if not exists raw_gpu_samples (
    run_id              varchar not null,
    point_id            varchar not null,
    gpu_index           integer,
    sampled_at          timestamptz,       -- nvidia-smi's timestamp, read as UTC (the sampler sets TZ=UTC)
    power_w             double,            -- power.draw
    utilization_gpu_pct double,            -- utilization.gpu
    memory_used_mib     double,            -- memory.used
    clock_sm_mhz        double,            -- clocks.sm
    throttle_reasons    varchar,           -- clocks_throttle_reasons.active, a bit mask as written
    source_file         varchar not null,
    source_line         integer not null
);

-- bench/<point_id>.metrics-series.txt, the engine's /metrics scraped every interval around a
-- benchmark point (or multi-turn workload): one row per sample's `@ <epoch seconds>` line (name
-- null; error holds what the line says after the time, e.g. `connection refused`), and one row
-- per exposition line of that sample (name, labels, value as exposed).
create table if not exists raw_metrics_series (
    run_id      varchar not null,
    point_id    varchar not null,          -- the file's name without .metrics-series.txt
    sample_idx  integer not null,          -- 0-based, in the file's order
    t_s         double,                    -- the sample's time, epoch seconds (UTC)
    name        varchar,                   -- null on the sample's `@` line
    labels      varchar,                   -- the label set as written, without braces
    value       double,
    error       varchar,                   -- on the `@` line: why the scrape failed; else null
    source_file varchar not null,
    source_line integer not null
);

-- ---------------------------------------------------------------- ingest records
-- What ingest records of its own reading, beside what the folders hold.

-- Whatever could not be read. Ingest goes on.
create table if not exists ingest_errors (
    run_id      varchar,
    source_file varchar not null,
    source_line integer,
    reason      varchar not null
);

-- Files of a sealed run folder that no longer match: a file whose sha256 differs from its
-- MANIFEST.sha256 line, a file missing or added, or the manifest itself rewritten or removed since
-- the first ingest (its sha256 differs from the one in raw_seals). When the folder had been read
-- before, its first-ingested rows are kept and only these rows are replaced.
create table if not exists raw_tampered (
    run_id      varchar not null,
    file        varchar not null,          -- the file, relative to its run folder
    reason      varchar not null,
    rows_kept   boolean not null,          -- true: the rows were read before the change and kept
    detected_at timestamptz not null,      -- first seen by ingest
    source_file varchar not null,          -- the file, relative to the project root
    source_line integer                    -- its line in MANIFEST.sha256, when it has one
);

-- ---------------------------------------------------------------- seals

-- The seal of each run folder as ingest first found it: the sha256 of its MANIFEST.sha256, so that
-- a manifest rewritten later (to match an edited file) is caught. This table is not a raw table
-- of the rebuild: ingest never drops it, and when its own columns change here, open_warehouse
-- makes it again and copies the old rows into it (stages/ingest/write.py, keep_seals), so a change of
-- raw.sql does not forget the first hashes. Rows stay when a folder is gone: one that comes back
-- is checked against the seal it had.
create table if not exists raw_seals (
    run_id            varchar primary key,
    manifest_sha256   varchar not null,
    sealed_by         varchar not null,    -- run (manifest there at first ingest) | ingest
    sealed_at         timestamptz,         -- when ingest wrote the manifest (null: sealed by the run)
    first_ingested_at timestamptz not null
);

-- ---------------------------------------------------------------- node probes
-- Written by the node ingest (stages/ingest/nodes.py) from the node folders the probe writes
-- (data/nodes/<node_kind>__<MMDD-HHMMSS>/), reloaded whole each time. Same conventions: every row
-- carries source_file (relative to the project root) and source_line; what cannot be read goes to
-- ingest_errors with a null run_id.

-- One row per node folder: meta.json, flattened (a folder without it still gets a row).
create table if not exists raw_nodes (
    node_id        varchar not null,       -- the folder's name, <node_kind>__<MMDD-HHMMSS>
    folder         varchar not null,       -- data/nodes/<node_id>
    node_kind      varchar,
    status         varchar,                -- complete | partial | interrupted | failed
    backend        varchar,                -- nccl | gloo
    device         varchar,                -- cuda | cpu
    device_count   integer,
    groups_asked   varchar,                -- auto, or the groups given, as JSON
    iters          integer,
    warmup         integer,
    sizes          varchar,                -- message sizes of the sweep in bytes, comma separated
    p2p_bytes      bigint,
    p2p_repeats    integer,
    skipped        varchar,                -- JSON list of the parts left out and why
    error          varchar,
    git_sha        varchar,
    started_at     timestamptz,
    finished_at    timestamptz,
    schema_version integer,
    source_file    varchar not null,
    source_line    integer not null
);

-- meta.json groups: each all-reduce group the probe swept and how it ended.
create table if not exists raw_node_groups (
    node_id        varchar not null,
    group_label    varchar not null,       -- e.g. 0-3, or 0,2 for a group that is not a range
    gpus           varchar,                -- comma separated GPU indices
    status         varchar,                -- ok | failed
    sizes_measured integer,
    error          varchar,
    source_file    varchar not null,
    source_line    integer not null
);

-- env.json: versions of the software stack.
create table if not exists raw_node_env (
    node_id     varchar not null,
    driver      varchar,
    cuda        varchar,
    torch       varchar,
    nccl        varchar,
    python      varchar,
    platform    varchar,
    gpu_count   integer,
    source_file varchar not null,
    source_line integer not null
);

-- env.json: every NCCL_*, CUDA_* and multicast variable the probe saw.
create table if not exists raw_node_env_vars (
    node_id     varchar not null,
    name        varchar not null,
    value       varchar,
    forced      boolean not null,          -- true when the probe set it (NVLink multicast off)
    source_file varchar not null,
    source_line integer not null
);

-- gpus.csv (nvidia-smi --query-gpu): one row per GPU, units from the header.
create table if not exists raw_node_gpus (
    node_id           varchar not null,
    gpu_index         integer not null,
    name              varchar,
    uuid              varchar,
    pci_bus_id        varchar,
    memory_total_mib  double,
    driver_version    varchar,
    power_limit_w     double,
    clocks_max_sm_mhz double,
    source_file       varchar not null,
    source_line       integer not null
);

-- topo.txt (nvidia-smi topo -m): one row per cell of the matrix.
create table if not exists raw_node_links (
    node_id     varchar not null,
    device      varchar not null,          -- the row: GPU0, NIC0, ...
    peer        varchar not null,          -- the column
    link        varchar not null,          -- the cell as printed: X, NV18, SYS, PIX, ...
    link_kind   varchar,                   -- self | nvlink | pcie (null: a code not known)
    nvlinks     integer,                   -- bonded NVLinks of an NV# cell
    source_file varchar not null,
    source_line integer not null
);

-- topo.txt: the affinity columns of each row of the matrix.
create table if not exists raw_node_affinity (
    node_id       varchar not null,
    device        varchar not null,
    cpu_affinity  varchar,
    numa_affinity varchar,
    gpu_numa_id   varchar,
    source_file   varchar not null,
    source_line   integer not null
);

-- nvlink.txt (nvidia-smi nvlink --status): one row per link of each GPU.
create table if not exists raw_node_nvlinks (
    node_id     varchar not null,
    gpu_index   integer not null,
    link        integer not null,
    link_gb_s   double,                    -- the speed printed for the link (null when inactive)
    active      boolean not null,
    state       varchar,                   -- the text after the colon, as printed
    source_file varchar not null,
    source_line integer not null
);

-- p2p.jsonl: one row per ordered GPU pair.
create table if not exists raw_node_p2p (
    node_id         varchar not null,
    src             integer not null,
    dst             integer not null,
    can_access_peer boolean not null,
    bytes           bigint,
    repeats         integer,
    time_us_median  double,
    copy_gbs        double,                -- GB/s, 1e9 bytes per second, median of the repeats
    copy_gbs_max    double,
    source_file     varchar not null,
    source_line     integer not null
);

-- allreduce.jsonl: one row per (group, message size), nccl-tests' definitions of algbw and busbw.
create table if not exists raw_node_allreduce (
    node_id     varchar not null,
    group_label varchar not null,
    gpus        varchar not null,          -- comma separated GPU indices
    ranks       integer,
    backend     varchar,
    device      varchar,
    dtype       varchar,
    bytes       bigint not null,
    count       bigint,                    -- elements of dtype
    iters       integer,
    warmup      integer,
    time_us     double not null,
    time_us_min double,
    time_us_max double,
    algbw_gbs   double not null,
    busbw_gbs   double not null,
    correct     boolean,                   -- the sum came out as expected on every rank
    source_file varchar not null,
    source_line integer not null
);

"""The raw folders' contract, written by the run stage, the node probe and the tools that make or
bring in run folders (the synthetic campaigns, the importer, the fault cases), read by ingest:
  run_folder   the run id, the folder's file names, UTC timestamps, meta.json and the schema version
  launch_out   launch.out's one writer and one reader
  sealed       write_once (whole or absent), the manifest and seal, whether a run is still writing
  lines        the line readers of the engine logs and small files (read_chunks, text_lines...)
               and the one reader of a raw file's JSON object (read_json_object)
  tailed       a log tailing several services: the engine's own blocks
  vllm_log, sglang_log   the engine logs' parsers (with engine_log, bulk and prefixes)
  node_smi     a node folder's nvidia-smi printouts
Every stage may import it; it imports only the core and itself."""

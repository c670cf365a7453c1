"""The raw folders' contract, written by the run stage, the node probe and the tools that make or
bring in run folders, read by ingest: the engine logs' line readers (lines, tailed) and parsers
(vllm_log, sglang_log, with engine_log, bulk and prefixes). Every stage may import it; it imports
only the core and itself."""

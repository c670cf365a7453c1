"""The ingest stage: run folders and node probes -> raw tables, with the parsers."""

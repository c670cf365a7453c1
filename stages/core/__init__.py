"""The shared core: configuration, provenance, secrets, raw-file reading, locks, the warehouse."""

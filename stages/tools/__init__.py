"""What no stage runs: node probe, synthetic campaigns, benchmarks, reliability, archive, publish."""

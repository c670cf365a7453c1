"""The model and run stages: engine, gate, benchmark clients, schedule, model generation."""

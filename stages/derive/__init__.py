"""The derive stage: staging, intermediate and public tables (SQL models), checks, exports."""

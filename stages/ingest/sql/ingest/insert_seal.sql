-- Record a run folder's seal at its first ingest; a seal already recorded is never replaced.
insert into raw_seals (run_id, manifest_sha256, sealed_by, sealed_at, first_ingested_at)
values ($run_id, $manifest_sha256, $sealed_by, $sealed_at, $first_ingested_at)
on conflict (run_id) do nothing;

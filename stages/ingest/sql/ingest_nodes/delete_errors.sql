-- Forget what the node ingest could not read last time: errors of files under the nodes folder.
-- Run ingest records its errors with a run id; node errors have none.
delete from ingest_errors
where run_id is null
  and starts_with(source_file, $prefix);

-- Forget the entries of the runs folder refused last time (links, names that are not run ids):
-- their errors have no run id and name the runs folder itself.
delete from ingest_errors
where run_id is null
  and source_file = $folder;

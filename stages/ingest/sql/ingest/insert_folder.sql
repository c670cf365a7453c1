-- Record that one run folder was read, with the fingerprint of its files.
insert into raw_folders (run_id, folder, fingerprint, files, bytes, ingested_at)
values ($run_id, $folder, $fingerprint, $files, $bytes, $ingested_at);

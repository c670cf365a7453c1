-- A tampered folder keeps its first-ingested rows: only its tamper record is replaced, and its
-- fingerprint updated so that the next ingest does not hash it again while it stays as it is.
delete from raw_tampered where run_id = $run_id;
update raw_folders set fingerprint = $fingerprint where run_id = $run_id;

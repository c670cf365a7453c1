"""Campaigns in and out of the project: `campaign import` of run folders made elsewhere
(import_runs.py), `campaign publish` of the built site as a versioned archive (publish.py), and
`campaign archive` of the raw run folders under DVC (archive.py)."""

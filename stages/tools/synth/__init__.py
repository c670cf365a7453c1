"""Synthetic campaigns, for scale and for cases no one can make on demand: run folders in the
shapes real runs have for the ingest benchmark (campaign.py, synth_*), and the scripted 8-GPU node
campaign and its repetition at scale for the render benchmark (synth_node*)."""

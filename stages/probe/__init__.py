"""The node probe, the `probe@<kind>` stage of dvc.yaml: the GPUs of a node (inventory, topology,
P2P copies, all-reduce) measured into a write-once folder under data/nodes (node_probe.py is its
command; the probe_* modules its steps)."""

"""The apply engine: rendered objects written to the cluster (stages, server-side apply or
create-if-absent, the per-kind table, Secret writes), the inventory, the prune and the diff.
Every request goes through orksync.cluster."""

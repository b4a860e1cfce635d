"""The cluster layer: connections, requests, and the watch-backed view of the cluster."""

"""Tests of the cluster client: kubeconfig, credentials, the HTTP transport, proxies, retries,
informers, egress, the fake API server."""

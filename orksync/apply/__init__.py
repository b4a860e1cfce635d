"""Applying rendered objects to a cluster. The only package that talks to the Kubernetes
API, always through orksync.apply.transport (`kubernetes` only produces auth-provider
tokens, in orksync.cluster.credentials)."""

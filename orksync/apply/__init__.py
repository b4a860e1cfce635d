"""Applying rendered objects to a cluster. The only package that talks to the Kubernetes
API (and the only one importing `kubernetes`, in orksync.cluster.kube)."""

"""orksync: render Orkestra Katalogs from Git into manifests and sync them to Kubernetes."""

__version__ = "0.1.0"

"""Fixtures of the cluster client's tests on the real control plane."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane


@pytest.fixture
def setup(control_plane: ControlPlane) -> Iterator[tuple[Kube, str, str]]:
    """A client, a namespace of its own (deleted after), and a random label value."""
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    ns = f"w-{uuid.uuid4().hex[:8]}"
    kube.create(kube.resource("v1", "Namespace"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                field_manager="test")
    yield kube, ns, uuid.uuid4().hex[:8]
    kube.delete(kube.resource("v1", "Namespace"), "", ns)
    kube.close()

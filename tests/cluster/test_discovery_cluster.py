"""Discovery shared by the roots of one agent (Kube.sibling with share_pool), on the real
control plane."""

from __future__ import annotations

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane

pytestmark = pytest.mark.cluster


def test_siblings_sharing_the_pool_discover_each_api_version_once(
        control_plane: ControlPlane) -> None:
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        first = kube.sibling(timeout=10.0, share_pool=True)
        second = kube.sibling(timeout=10.0, share_pool=True)
        own = kube.sibling(timeout=10.0)
        assert first.resource("v1", "ConfigMap").plural == "configmaps"
        assert first.requests == 1
        assert second.resource("v1", "ConfigMap").plural == "configmaps"
        assert second.requests == 0  # the cache its sibling filled
        own.resource("v1", "ConfigMap")
        assert own.requests == 1  # a pool of its own: its own discovery
        second.forget("v1")
        first.resource("v1", "Secret")
        assert first.requests == 2  # forgotten for every sibling
    finally:
        kube.close()

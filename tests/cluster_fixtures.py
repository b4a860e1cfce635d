"""Pytest fixtures for tests against the local control plane (see testbed.controlplane).

Import them into ``tests/conftest.py``::

    from tests.cluster_fixtures import *  # noqa: F403

Marker ``cluster``: the test needs the local control plane (etcd + kube-apiserver +
kube-controller-manager). Register it in pyproject.toml::

    [tool.pytest.ini_options]
    markers = ["cluster: needs the local control plane (etcd + kube-apiserver)"]

One control plane per session, a fresh ``ApiClient`` and a fresh namespace per test. When the
binaries can be neither found nor built, cluster tests are skipped, except in CI
(``CI=true``) where that is a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient, CoreV1Api, V1DeleteOptions, V1Namespace, V1ObjectMeta
from kubernetes.client.exceptions import ApiException

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane, ControlPlaneError, find_binaries

__all__ = ["FIELD_MANAGER", "admin", "api_client", "control_plane", "namespace", "sa_namespace"]

FIELD_MANAGER = "orksync-tests"
"""Field manager for writes the fixtures (and tests) make."""


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The session's control plane, with kube-controller-manager (garbage collector, namespaces)
    and an audit log of every write, which the last test scans for leaked secret values."""
    try:
        bin_dir = find_binaries()
    except ControlPlaneError as exc:
        reason = f"local control plane binaries unavailable: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    audit_log = tmp_path_factory.getbasetemp() / "control-plane-audit.log"
    with ControlPlane(bin_dir=bin_dir, controller_manager=True, audit_log=audit_log) as cp:
        yield cp


@pytest.fixture
def api_client(control_plane: ControlPlane) -> Iterator[ApiClient]:
    """A fresh ApiClient (own Configuration) authenticated as the admin; closed after the test."""
    client = control_plane.api_client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def namespace(api_client: ApiClient) -> Iterator[str]:
    """A fresh namespace ``t-<random>``; deleted after the test without waiting for it to go."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = CoreV1Api(api_client)
    core.create_namespace(
        V1Namespace(metadata=V1ObjectMeta(name=name)), field_manager=FIELD_MANAGER
    )
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name, body=V1DeleteOptions(propagation_policy="Background"))
        except ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture(scope="module")
def admin(control_plane: ControlPlane) -> Iterator[Kube]:
    """orksync's client of the control plane as its admin, one per test module."""
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield kube
    kube.close()


@pytest.fixture(scope="module")
def sa_namespace(admin: Kube) -> Iterator[str]:
    """A namespace of the module's own, for its ServiceAccounts."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    ns = admin.resource("v1", "Namespace")
    admin.create(ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                 field_manager=FIELD_MANAGER)
    yield name
    admin.delete(ns, "", name)

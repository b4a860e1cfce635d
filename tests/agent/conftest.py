"""Fixtures of the agent tests: `env`, a git daemon serving repositories to an `orksync
agent` without --repo-url that serves the Sync objects of a namespace of its own, with the
Sync CRD installed (test_syncs_cluster.py, test_synctenancy_cluster.py); `fleet`, the
replicas of one agent sharing Syncs (test_scaleout_cluster.py, test_elastic_shards_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon
from tests.agent.test_scaleout_cluster import Fleet
from tests.agent.test_syncs_cluster import Env, install_sync_crd


@pytest.fixture
def env(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Env]:
    base = tmp_path / "served"
    base.mkdir()
    with GitDaemon(base) as daemon:
        made = Env(control_plane, tmp_path, daemon, base)
        install_sync_crd(made.kube)
        try:
            yield made
        finally:
            made.stop()
            # the Syncs go, their finalizers released without an agent: later tests'
            # `orksync status` lists the Syncs of the cluster first
            res = made.kube.resource("orksync.io/v1alpha1", "Sync")
            for obj in made.kube.list(res, namespace=made.ns):
                made.kube.request("PATCH", res.path(made.ns, obj["metadata"]["name"]),
                                  body={"metadata": {"finalizers": None}},
                                  content_type="application/merge-patch+json")
                made.kube.delete(res, made.ns, obj["metadata"]["name"])
            made.kube.close()


@pytest.fixture
def fleet(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Fleet]:
    base = tmp_path / "served"
    base.mkdir()
    with GitDaemon(base) as daemon:
        made = Fleet(control_plane, tmp_path, daemon, base)
        install_sync_crd(made.kube)
        try:
            yield made
        finally:
            made.close()

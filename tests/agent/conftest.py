"""Fixtures of the agent tests: `env`, a git daemon serving repositories to an `orksync
agent` without --repo-url that serves the Sync objects of a namespace of its own, with the
Sync CRD installed (test_syncs_cluster.py, test_synctenancy_cluster.py); `fleet`, the
replicas of one agent sharing Syncs (test_scaleout_cluster.py, test_elastic_shards_cluster.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon
from tests.agent.test_scaleout_cluster import Fleet
from tests.agent.test_syncs_cluster import Env, install_sync_crd, remove_syncs

T = TypeVar("T", Env, Fleet)


@contextlib.contextmanager
def served(control_plane: ControlPlane, tmp_path: Path, make: type[T]) -> Iterator[T]:
    """`make` (an Env or a Fleet) over a git daemon serving `tmp_path/served`, with the
    Sync CRD installed."""
    base = tmp_path / "served"
    base.mkdir()
    with GitDaemon(base) as daemon:
        made = make(control_plane, tmp_path, daemon, base)
        install_sync_crd(made.kube)
        yield made


@pytest.fixture
def env(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Env]:
    with served(control_plane, tmp_path, Env) as made:
        try:
            yield made
        finally:
            made.stop()
            remove_syncs(made.kube, made.ns)
            made.kube.close()


@pytest.fixture
def fleet(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Fleet]:
    with served(control_plane, tmp_path, Fleet) as made:
        try:
            yield made
        finally:
            made.close()

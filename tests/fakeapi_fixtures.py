"""Fixtures for unit tests on the fake API server (tests/fakeapi.py): a served fake, orksync's
client of it, and a repository synced into it the way `orksync sync --once` does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.delete import DeletionOptions
from orksync.apply.inventory import Inventory
from orksync.cluster.kube import Kube
from orksync.katalog.loader import load_repository
from orksync.model import Action, Change, ObjRef
from orksync.render.engine import render_catalog
from orksync.sync import (
    SyncOptions,
    SyncRequest,
    SyncResult,
    hook_renderers,
    read_inventory,
    sync_once,
)
from tests.fakeapi import FakeApiServer, Request
from tests.helpers import write_repo

__all__ = ["kube", "repo", "server"]  # the fixtures, for `import *` in a test module

WIDGET_API = "test.orksync.io/v1"
NS = "apps"


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        yield fake


@pytest.fixture
def kube(server: FakeApiServer, tmp_path: Path) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(server.kubeconfig(tmp_path / "kubeconfig"))
    yield client
    client.close()


def ref(kind: str, name: str, ns: str = NS) -> ObjRef:
    api = {"Deployment": "apps/v1", "Widget": WIDGET_API, "Job": "batch/v1",
           "ClusterRole": "rbac.authorization.k8s.io/v1",
           "CustomResourceDefinition": "apiextensions.k8s.io/v1"}.get(kind, "v1")
    cluster_scoped = kind in ("ClusterRole", "Namespace", "CustomResourceDefinition")
    return ObjRef(api_version=api, kind=kind, namespace="" if cluster_scoped else ns,
                  name=name)


class Repo:
    """A repository in a temporary folder and its sync root, synced into the fake."""

    def __init__(self, server: FakeApiServer, kube: Kube, root: Path,
                 name: str = "test") -> None:
        self.server, self.kube, self.root, self.name = server, kube, root, name

    def write(self, files: dict[str, str]) -> Repo:
        write_repo(self.root, files)
        return self

    def remove(self, rel: str) -> None:
        (self.root / rel).unlink()

    def sync(self, *, log: bool = True, **options: Any) -> SyncResult:
        """One sync; the fake's request log holds this sync's requests only."""
        catalog = load_repository(self.root)
        rendered = render_catalog(catalog)
        opts = SyncOptions(deletion=DeletionOptions(poll=0.01), **options)
        if log:
            self.server.clear_log()
        return sync_once(self.kube, SyncRequest(rendered, inventory_name=self.name,
                                                hooks=hook_renderers(catalog), options=opts))

    def stored(self) -> Inventory:
        return read_inventory(self.kube, self.name)

    def live(self, r: ObjRef) -> dict[str, Any] | None:
        return self.server.object(r.api_version, r.kind, r.namespace, r.name)


@pytest.fixture
def repo(server: FakeApiServer, kube: Kube, tmp_path: Path) -> Repo:
    return Repo(server, kube, tmp_path / "repo")


def actions(result: SyncResult) -> dict[ObjRef, Action]:
    """The last action of each object."""
    return {c.ref: c.action for c in result.changes.changes}


def change(result: SyncResult, r: ObjRef) -> Change:
    (found,) = [c for c in result.changes.changes if c.ref == r]
    return found


def writes(server: FakeApiServer) -> list[tuple[str, str]]:
    """(verb, path) of every write logged."""
    return [(r.verb, r.path) for r in server.requests(writes=True)]


def reads_of_objects(server: FakeApiServer) -> list[Request]:
    """GETs of single objects (not discovery, not LISTs)."""
    return [r for r in server.requests(verb="get") if not r.discovery]

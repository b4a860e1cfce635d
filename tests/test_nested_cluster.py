"""A custom resource a `custom:` block creates, rendered through its own Katalog entry,
against the real control plane (issue 33): the created custom resource's own children
exist, owned by it; a second sync changes nothing; the `custom:` block leaving the Katalog
prunes the created custom resource and its children; removing the top custom resource from
Git tears the chain down (its teardown, then the garbage collector: the created custom
resource, then its children). orksync.render.engine.render_nested,
orksync.apply.engine (owner uids of nested custom resources)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.lifecycle.teardown import DeletionOptions, remove_finalizer
from orksync.model import Action, ObjRef
from orksync.render.engine import render_catalog
from orksync.sync import SyncOptions, SyncResult, hook_renderers, sync_once
from testbed.controlplane import ControlPlane
from tests import nested_cases as nc
from tests.helpers import wait_for, write_repo

pytestmark = pytest.mark.cluster


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    name = f"nest-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        for kind in ("AppEnvironment", "CacheCluster"):
            res = kube.resource("nest.orksync.io/v1", kind)
            for item in kube.list(res, namespace=name):
                remove_finalizer(kube, res, item)
        kube.delete(kube.resource("v1", "Namespace"), "", name)
    except ClusterError:
        pass


def ref(kind: str, name: str, ns: str) -> ObjRef:
    api = "apps/v1" if kind == "Deployment" else "nest.orksync.io/v1"
    return ObjRef(api_version=api, kind=kind, namespace=ns, name=name)


def get(kube: Kube, r: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(r.api_version, r.kind), r.namespace, r.name)


def sync(kube: Kube, root: Path, name: str) -> SyncResult:
    catalog = load_repository(root)
    rendered = render_catalog(catalog)
    assert not rendered.errors, rendered.errors
    return sync_once(kube, rendered, inventory_name=name, hooks=hook_renderers(catalog),
                     options=SyncOptions(deletion=DeletionOptions(poll=0.1)))


def test_a_created_custom_resource_gets_its_own_children_and_goes_with_its_parent(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    root = write_repo(tmp_path / "repo", nc.files(ns))
    inventory = f"nest-{uuid.uuid4().hex[:8]}"
    first = sync(kube, root, inventory)
    assert not first.changes.failed, first.changes.failed
    env = get(kube, ref("AppEnvironment", "dev", ns))
    cache = get(kube, ref("CacheCluster", "dev-cache", ns))
    redis = get(kube, ref("Deployment", "dev-cache-redis", ns))
    assert env is not None and cache is not None and redis is not None
    assert [o["uid"] for o in cache["metadata"]["ownerReferences"]] == \
        [env["metadata"]["uid"]]
    assert [o["uid"] for o in redis["metadata"]["ownerReferences"]] == \
        [cache["metadata"]["uid"]]
    assert redis["spec"]["replicas"] == 2
    assert cache["metadata"]["annotations"]["orksync.io/owner"] == \
        str(ref("AppEnvironment", "dev", ns))
    assert redis["metadata"]["annotations"]["orksync.io/owner"] == \
        str(ref("CacheCluster", "dev-cache", ns))

    again = sync(kube, root, inventory)  # the created CacheCluster's uid is found again
    assert not again.changes.failed, again.changes.failed
    assert not [c for c in again.changes.changes
                if c.action in (Action.CREATED, Action.CONFIGURED)], again.changes.changes

    # the custom: block leaves the Katalog: the created custom resource and its children
    # are pruned, the top custom resource stays
    without = nc.katalog().replace(nc.katalog().split("        onCreate:\n")[1].split(
        "    cachecluster:")[0], "          configMaps: [{name: \"{{ .metadata.name }}-cm\"}]\n")
    write_repo(root, {"katalog.yaml": without})
    pruned = sync(kube, root, inventory)
    assert not pruned.changes.failed, pruned.changes.failed
    deleted = [c.ref for c in pruned.changes.changes if c.action is Action.DELETED]
    assert set(deleted) == {ref("CacheCluster", "dev-cache", ns),
                            ref("Deployment", "dev-cache-redis", ns)}, deleted
    for kind, name in (("CacheCluster", "dev-cache"), ("Deployment", "dev-cache-redis")):
        wait_for(f"{kind}/{name} deleted", lambda k=kind, n=name: get(
            kube, ref(k, n, ns)) is None)
    assert get(kube, ref("AppEnvironment", "dev", ns)) is not None
    write_repo(root, {"katalog.yaml": nc.katalog()})
    back = sync(kube, root, inventory)
    assert not back.changes.failed, back.changes.failed
    assert get(kube, ref("Deployment", "dev-cache-redis", ns)) is not None

    (root / "apps" / "dev.yaml").unlink()
    gone = sync(kube, root, inventory)
    assert not gone.changes.failed, gone.changes.failed
    for kind, name in (("AppEnvironment", "dev"), ("CacheCluster", "dev-cache"),
                       ("Deployment", "dev-cache-redis")):
        wait_for(f"{kind}/{name} deleted", lambda k=kind, n=name: get(
            kube, ref(k, n, ns)) is None)

"""Orkestra's runtime.cleanup against the real control plane: a custom resource whose
cleanup conditions pass on its live status is deleted by the sync (its onDelete runs, its
children go), is not applied again while Git holds it unchanged, and comes back when Git
changes it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.delete import DeletionOptions
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.lifecycle.teardown import remove_finalizer
from orksync.model import Action, ObjRef
from orksync.sync import (
    SyncOptions,
    SyncRequest,
    SyncResult,
    hook_renderers,
    read_inventory,
    render_live,
    sync_once,
)
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, finished_job_status, katalog, wait_for, widget, write_repo

pytestmark = pytest.mark.cluster

API = "test.orksync.io/v1"

CLEANUP = katalog("""\
        onCreate:
          configMaps: [{name: "{{ .metadata.name }}-config", data: {a: "1"}}]
        onDelete:
          timeout: 1s
          jobs:
            - {name: "{{ .metadata.name }}-farewell", image: busybox, command: [echo, bye]}
        runtime:
          cleanup:
            or: [{field: status.phase, equals: Done}]
""")


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    try:
        for item in k.list(k.resource(API, "Widget")):
            remove_finalizer(k, k.resource(API, "Widget"), item)
    except ClusterError:
        pass
    k.close()


def sync(kube: Kube, root: Path, name: str) -> SyncResult:
    catalog = load_repository(root)
    assert not catalog.errors, catalog.errors
    rendered = render_live(kube, catalog)
    assert not rendered.errors, rendered.errors
    return sync_once(kube, SyncRequest(rendered, inventory_name=name, hooks=hook_renderers(catalog),
                                       options=SyncOptions(deletion=DeletionOptions(poll=0.1))))


def get(kube: Kube, ref: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(ref.api_version, ref.kind), ref.namespace, ref.name)


def actions(result: SyncResult, ref: ObjRef) -> list[Action]:
    return [c.action for c in result.changes.changes if c.ref == ref]


def test_cleanup_deletes_a_finished_custom_resource_once_and_git_brings_it_back_changed(
        kube: Kube, tmp_path: Path) -> None:
    ns, name = f"c-{uuid.uuid4().hex[:8]}", f"test-{uuid.uuid4().hex[:8]}"
    w = ObjRef(api_version=API, kind="Widget", namespace=ns, name="w")
    config = ObjRef(api_version="v1", kind="ConfigMap", namespace=ns, name="w-config")
    farewell = ObjRef(api_version="batch/v1", kind="Job", namespace=ns, name="w-farewell")
    write_repo(tmp_path, {"katalog.yaml": CLEANUP, "crd.yaml": CRD,
                          "w.yaml": widget("w", ns, size=1)})
    first = sync(kube, tmp_path, name)
    assert Action.CREATED in actions(first, w) and get(kube, config) is not None
    sync(kube, tmp_path, name)
    assert get(kube, w) is not None  # still running: kept

    # the custom resource reaches its terminal state
    res = kube.resource(API, "Widget")
    kube.request("PATCH", res.path(ns, "w", "status"), body={"status": {"phase": "Done"}},
                 content_type="application/merge-patch+json")
    held = sync(kube, tmp_path, name)  # its onDelete Job runs first
    assert actions(held, w) == [Action.FAILED] and get(kube, farewell) is not None
    assert w in held.inventory and not held.inventory.cleaned  # not deleted yet
    # no kubelet runs here: write the status a job controller would
    jobs = kube.resource("batch/v1", "Job")
    kube.request("PATCH", jobs.path(ns, "w-farewell", "status"),
                 body={"status": finished_job_status(ok=True)},
                 content_type="application/merge-patch+json")
    done = sync(kube, tmp_path, name)  # its status still says Done: still to be deleted
    assert Action.DELETED in actions(done, w), done.changes.changes
    # its children go with it (the garbage collector follows the owner references; it
    # learns a new kind at its discovery resync, hence the generous wait)
    wait_for("the custom resource and its child gone",
             lambda: get(kube, w) is None and get(kube, config) is None, 120)
    stored = read_inventory(kube, name)
    assert [ref for ref, _ in stored.cleaned] == [w] and w not in stored

    # Git still holds it, unchanged: it is not applied again
    again = sync(kube, tmp_path, name)
    assert actions(again, w) == [Action.SKIPPED]
    assert "deleted by runtime.cleanup" in \
        next(c.message for c in again.changes.changes if c.ref == w)
    assert get(kube, w) is None and get(kube, config) is None
    assert read_inventory(kube, name).cleaned == stored.cleaned

    # a change in Git is a new run
    write_repo(tmp_path, {"w.yaml": widget("w", ns, size=2)})
    back = sync(kube, tmp_path, name)
    assert Action.CREATED in actions(back, w)
    live = get(kube, w)
    assert live is not None and live["spec"]["size"] == 2 and get(kube, config) is not None
    assert read_inventory(kube, name).cleaned == ()

"""Orkestra's deletion protection against the real control plane: prune and teardown never
delete a CRD or custom resource labelled orkestra.io/deletion-protection=true (the refusal
is reported, the object stays in the inventory and is checked again at every sync); the
CRDs of a Katalog with security.deletionProtection carry the label."""

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
from orksync.render.engine import render_catalog
from orksync.sync import (
    SyncOptions,
    SyncRequest,
    SyncResult,
    hook_renderers,
    read_inventory,
    sync_once,
)
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, KATALOG, widget, write_repo

pytestmark = pytest.mark.cluster

LABEL = "orkestra.io/deletion-protection"
REFUSAL = (f"not deleted: deletion protection (label {LABEL}=true); remove the label, or set "
           "security.deletionProtection.enabled: false, to let it go")
MERGE = "application/merge-patch+json"


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    name = f"dp-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        for api, kind in (("test.orksync.io/v1", "Widget"), ("protect.orksync.io/v1", "Gizmo")):
            res = kube.resource(api, kind)
            for item in kube.list(res, namespace=name):
                remove_finalizer(kube, res, item)
        kube.delete(kube.resource("v1", "Namespace"), "", name)
    except ClusterError:
        pass


def sync(kube: Kube, root: Path, inventory: str, **options: Any) -> SyncResult:
    catalog = load_repository(root)
    rendered = render_catalog(catalog)
    assert not rendered.errors, rendered.errors
    return sync_once(kube, SyncRequest(
        rendered, inventory_name=inventory, hooks=hook_renderers(catalog),
        options=SyncOptions(deletion=DeletionOptions(poll=0.1), **options)))


def live(kube: Kube, ref: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(ref.api_version, ref.kind), ref.namespace, ref.name)


def test_a_labelled_custom_resource_that_leaves_git_is_not_torn_down(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    inventory = f"test-{uuid.uuid4().hex[:8]}"
    write_repo(tmp_path, {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                          "w.yaml": widget("w", ns, image="nginx", port=8080)})
    assert not sync(kube, tmp_path, inventory).changes.failed
    w = ObjRef(api_version="test.orksync.io/v1", kind="Widget", namespace=ns, name="w")
    deploy = ObjRef(api_version="apps/v1", kind="Deployment", namespace=ns, name="w")
    res = kube.resource(w.api_version, w.kind)
    kube.request("PATCH", res.path(ns, "w"), body={"metadata": {"labels": {LABEL: "true"}}},
                 content_type=MERGE)

    (tmp_path / "w.yaml").unlink()
    held = sync(kube, tmp_path, inventory)
    assert [(c.action, c.message) for c in held.changes.changes if c.ref == w] == [
        (Action.SKIPPED, REFUSAL)]
    assert live(kube, w) is not None and live(kube, deploy) is not None
    assert not (live(kube, w) or {})["metadata"].get("deletionTimestamp")
    assert {w, deploy} <= read_inventory(kube, inventory).refs()  # checked again next time

    kube.request("PATCH", res.path(ns, "w"), body={"metadata": {"labels": {LABEL: None}}},
                 content_type=MERGE)
    released = sync(kube, tmp_path, inventory)
    assert [c.action for c in released.changes.changes if c.ref == w][-1] is Action.DELETED


GIZMO_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.protect.orksync.io
spec:
  group: protect.orksync.io
  scope: Namespaced
  names: {kind: Gizmo, plural: gizmos}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


def gizmo_katalog(security: str) -> str:
    return f"""
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: gizmos}}
security: {security}
spec:
  crds:
    gizmo:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          configMaps: [{{name: "{{{{ .metadata.name }}}}-cm", data: {{a: b}}}}]
"""


def test_the_crd_of_a_protected_katalog_is_never_pruned_until_protection_is_lifted(
        kube: Kube, tmp_path: Path, ns: str) -> None:
    inventory = f"test-{uuid.uuid4().hex[:8]}"
    crd = ObjRef(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition",
                 namespace="", name="gizmos.protect.orksync.io")
    write_repo(tmp_path, {"katalog.yaml": gizmo_katalog("{deletionProtection: {}}"),
                          "crd.yaml": GIZMO_CRD,
                          "other.yaml": widget("keep", ns).replace("Widget", "Gizmo").replace(
                              "test.orksync.io/v1", "protect.orksync.io/v1")})
    assert not sync(kube, tmp_path, inventory).changes.failed
    assert (live(kube, crd) or {})["metadata"]["labels"][LABEL] == "true"

    for rel in ("katalog.yaml", "crd.yaml", "other.yaml"):
        (tmp_path / rel).unlink()
    held = sync(kube, tmp_path, inventory, allow_empty=True, prune_crds=True)
    assert [(c.action, c.message) for c in held.changes.changes if c.ref == crd] == [
        (Action.SKIPPED, REFUSAL)]
    assert live(kube, crd) is not None and crd in read_inventory(kube, inventory).refs()

    # enabled: false removes the label at the next apply; then the CRD may go
    write_repo(tmp_path, {"katalog.yaml": gizmo_katalog("{deletionProtection: {enabled: false}}"),
                          "crd.yaml": GIZMO_CRD})
    assert not sync(kube, tmp_path, inventory).changes.failed
    assert LABEL not in ((live(kube, crd) or {})["metadata"].get("labels") or {})
    for rel in ("katalog.yaml", "crd.yaml"):
        (tmp_path / rel).unlink()
    released = sync(kube, tmp_path, inventory, allow_empty=True, prune_crds=True)
    assert [c.action for c in released.changes.changes if c.ref == crd] == [Action.DELETED]

"""The applier's LISTs, sent for every stage at once when the apply starts
(orksync.apply.prefetch.Prefetch), against the real control plane: what is listed, when,
how often, and the stages that must list again because this apply wrote what they read."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from orksync.apply.engine import Applier
from orksync.apply.run import ApplyOptions
from orksync.cluster.kube import Kube
from orksync.model import Action, ObjRef, Origin, RenderedObject, WritePolicy
from orksync.render.entry import STAGE_CHILDREN, STAGE_CR, STAGE_CRD
from orksync.render.kinds import ORDER
from testbed.controlplane import ControlPlane
from tests.helpers import record_requests

pytestmark = pytest.mark.cluster

@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


def obj(body: dict[str, Any], stage: int, owner: ObjRef | None = None) -> RenderedObject:
    return RenderedObject(ref=ObjRef.of(body), body=body, policy=WritePolicy.APPLY,
                          origin=Origin(file="test"), stage=stage, owner=owner)


def configmap(ns: str, name: str, data: dict[str, str], stage: int,
              owner: ObjRef | None = None) -> RenderedObject:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner is not None:
        meta["labels"] = {"app.kubernetes.io/managed-by": "orksync"}
    return obj({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data},
               stage, owner)


def gadget_crd(group: str) -> RenderedObject:
    return obj({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": f"gadgets.{group}"},
                "spec": {"group": group, "scope": "Namespaced",
                         "names": {"kind": "Gadget", "plural": "gadgets",
                                   "singular": "gadget"},
                         "versions": [{"name": "v1", "served": True, "storage": True,
                                       "schema": {"openAPIV3Schema": {
                                           "type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}}}]}},
               STAGE_CRD)


def test_custom_resources_of_a_crd_created_by_the_same_apply_are_listed_once_it_is_established(
        kube: Kube, monkeypatch: pytest.MonkeyPatch) -> None:
    """Discovery cannot resolve the kind when the apply starts: its stage lists it, after
    the CRD is Established. The resync lists it at the start, with the rest, and sends no
    GET for the unchanged, Established CRD and no new discovery of its group."""
    suffix = uuid.uuid4().hex[:8]
    group, ns = f"p{suffix}.test.orksync.io", f"pf-{suffix}"
    crd = gadget_crd(group)
    gadget = obj({"apiVersion": f"{group}/v1", "kind": "Gadget",
                  "metadata": {"name": "g", "namespace": ns}, "spec": {"size": 1}}, STAGE_CR)
    child = configmap(ns, "g-config", {"k": "v"}, STAGE_CHILDREN + ORDER["configMaps"],
                      owner=gadget.ref)
    gadgets = kube_path(group)
    sent = record_requests(kube, monkeypatch)
    first = Applier(kube).apply([crd, gadget, child])
    assert {c.ref: c.action for c in first.changes} == {
        crd.ref: Action.CREATED, ObjRef(api_version="v1", kind="Namespace", name=ns):
        Action.CREATED, gadget.ref: Action.CREATED, child.ref: Action.CREATED}
    established = sent.index(("GET", f"/apis/apiextensions.k8s.io/v1/"
                                      f"customresourcedefinitions/gadgets.{group}"))
    assert [i for i, s in enumerate(sent) if s == ("GET", gadgets)] != []
    assert all(i > established for i, s in enumerate(sent) if s == ("GET", gadgets)), sent

    sent.clear()
    again = Applier(kube).apply([crd, gadget, child])
    assert {c.action for c in again.changes} == {Action.UNCHANGED}, again.changes
    assert sent.count(("GET", gadgets)) == 1, sent
    assert not [s for s in sent if "customresourcedefinitions/" in s[1]], sent
    assert ("GET", f"/apis/{group}/v1") not in sent, "discovery kept for an unchanged CRD"
    kube.delete(kube.resource("v1", "Namespace"), "", ns)


def test_a_custom_resource_waits_until_discovery_serves_the_kind_of_its_new_crd(
        kube: Kube, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API server serves a new kind in discovery a moment after its CRD is Established;
    a custom resource applied in between failed as a kind "not served" (seen once in CI).
    Here discovery holds the kind back from its first two answers after the CRD is
    Established: the apply waits for it, and the custom resource is created."""
    suffix = uuid.uuid4().hex[:8]
    group, ns = f"d{suffix}.test.orksync.io", f"dc-{suffix}"
    crd = gadget_crd(group)
    gadget = obj({"apiVersion": f"{group}/v1", "kind": "Gadget",
                  "metadata": {"name": "g", "namespace": ns}, "spec": {"size": 1}}, STAGE_CR)
    discover = kube._discover
    held_back = []

    def lagging(api_version: str) -> dict[str, Any]:
        found = discover(api_version)
        if api_version == f"{group}/v1" and "Gadget" in found and len(held_back) < 2:
            held_back.append(api_version)
            found = {k: v for k, v in found.items() if k != "Gadget"}
            kube._resources[api_version] = found
        return found
    monkeypatch.setattr(kube, "_discover", lagging)
    changes = {c.ref: c for c in Applier(kube).apply([crd, gadget]).changes}
    assert changes[gadget.ref].action is Action.CREATED, changes[gadget.ref]
    assert len(held_back) == 2

    # a kind that discovery never serves: the CRD fails after the timeout, saying why
    other = gadget_crd(f"n{suffix}.test.orksync.io")
    monkeypatch.setattr(kube, "_discover", lambda api_version: {} if api_version.startswith(
        f"n{suffix}.") else discover(api_version))
    failed = Applier(kube, ApplyOptions(crd_timeout=1)).apply([other]).changes
    assert [(c.action, c.message) for c in failed] == [
        (Action.FAILED, "not served by discovery within 1s")]


def kube_path(group: str) -> str:
    return f"/apis/{group}/v1/gadgets"


def test_a_no_change_resync_sends_one_list_per_kind_and_one_discovery_per_version(
        kube: Kube, control_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch) -> None:
    """The LISTs go out together, on several threads: none is sent twice, and discovery
    of an API version is not repeated by the threads that need it at the same time."""
    ns = f"pf-{uuid.uuid4().hex[:8]}"
    cr_ns = ObjRef(api_version="v1", kind="Namespace", name=ns)
    objects = [
        obj({"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": f"sa{i}", "namespace": ns}}, STAGE_CR) for i in range(3)]
    objects += [configmap(ns, f"cm{i}", {"i": str(i)}, STAGE_CR + 1) for i in range(3)]
    objects += [obj({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": "r", "namespace": ns},
                     "rules": [{"apiGroups": [""], "resources": ["pods"],
                                "verbs": ["get"]}]}, STAGE_CR + 3)]
    first = Applier(kube).apply(objects)
    assert not first.failed and first.by_ref()[cr_ns].action is Action.CREATED
    fresh = Kube.from_kubeconfig(control_plane.kubeconfig)  # nothing discovered yet
    try:
        sent = record_requests(fresh, monkeypatch)
        again = Applier(fresh).apply(objects)
    finally:
        fresh.close()
    assert {c.action for c in again.changes} == {Action.UNCHANGED}, again.changes
    assert sorted(sent) == sorted([
        ("GET", "/api/v1"), ("GET", "/apis/rbac.authorization.k8s.io/v1"),
        ("GET", "/api/v1/namespaces"), ("GET", "/api/v1/serviceaccounts"),
        ("GET", "/api/v1/configmaps"),
        ("GET", "/apis/rbac.authorization.k8s.io/v1/roles")]), sent
    kube.delete(kube.resource("v1", "Namespace"), "", ns)


def test_an_object_an_earlier_stage_wrote_is_listed_again_for_a_later_one(
        kube: Kube, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same ConfigMap in two stages (a hand-made render): the later stage must see the
    earlier one's write, not the view from the start of the apply, in which its own body
    is already there (it would be taken as unchanged, and the earlier body would stay)."""
    ns = f"pf-{uuid.uuid4().hex[:8]}"
    later = configmap(ns, "twice", {"k": "later"}, STAGE_CR + 2)
    Applier(kube).apply([later])
    earlier = configmap(ns, "twice", {"k": "earlier"}, STAGE_CR + 1)
    sent = record_requests(kube, monkeypatch)
    changes = Applier(kube).apply([earlier, later]).changes
    assert [c.action for c in changes] == [Action.CONFIGURED, Action.CONFIGURED], changes
    res = kube.resource("v1", "ConfigMap")
    assert kube.get(res, ns, "twice")["data"] == {"k": "later"}
    assert sent.count(("GET", "/api/v1/configmaps")) == 2, sent
    kube.delete(kube.resource("v1", "Namespace"), "", ns)

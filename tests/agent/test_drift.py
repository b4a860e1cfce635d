"""Drift repair's plan (orksync.agent.drift.Plan): which key each applied object is
repaired under, and which kinds are watched."""

from __future__ import annotations

from orksync.agent.drift import ROOT, Plan
from orksync.apply.inventory import Inventory, InventoryEntry
from orksync.model import ObjRef, Origin, RenderedObject, RenderedSet, WritePolicy


def obj(api_version: str, kind: str, name: str, namespace: str = "",
        owner: ObjRef | None = None) -> RenderedObject:
    body = {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}
    return RenderedObject(ref=ObjRef.of(body), body=body, policy=WritePolicy.APPLY,
                          origin=Origin(file="x.yaml"), stage=0, owner=owner)


def test_children_are_repaired_under_their_custom_resource_and_crds_under_root() -> None:
    crd = obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.test.orksync.io")
    a = obj("test.orksync.io/v1", "Widget", "a", "ns")
    b = obj("test.orksync.io/v1", "Widget", "b", "ns")
    a_map = obj("v1", "ConfigMap", "a-one", "ns", owner=a.ref)
    a_role = obj("rbac.authorization.k8s.io/v1", "ClusterRole", "a-reader", owner=a.ref)
    b_map = obj("v1", "ConfigMap", "b-one", "ns", owner=b.ref)
    old = InventoryEntry(ref=ObjRef(api_version="v1", kind="Secret", namespace="ns",
                                    name="gone"), owner=a.ref)
    plan = Plan.of(RenderedSet(objects=(crd, a, b, a_map, a_role, b_map)),
                   Inventory.of([old]), {})
    assert plan.objects == {ROOT: (crd,), str(a.ref): (a, a_map, a_role),
                            str(b.ref): (b, b_map)}
    assert plan.key_of[a_role.ref] == str(a.ref) and plan.key_of[crd.ref] == ROOT
    assert plan.crs == {str(a.ref): a.ref, str(b.ref): b.ref}
    # what was applied, and what the inventory still holds (a teardown deletes it)
    assert plan.kinds() == {("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                            ("test.orksync.io/v1", "Widget"), ("v1", "ConfigMap"),
                            ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("v1", "Secret")}

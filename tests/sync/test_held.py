"""What a broken input holds, decided without a cluster: a plain manifest that is a custom
resource of this sync root (orksync.sync.hold_reclassified) and the teardown of a custom
resource no onDelete renderer handles while the render has errors
(orksync.apply.delete.teardown_waits). The same end to end:
tests/sync/test_broken_input_hold_cluster.py."""

from __future__ import annotations

from typing import Any

from orksync.apply.delete import teardown_waits
from orksync.apply.inventory import Inventory, InventoryEntry
from orksync.errors import InputError, LoadError
from orksync.model import (
    STAGE_PLAIN,
    Action,
    ObjRef,
    Origin,
    RenderedObject,
    RenderedSet,
    WritePolicy,
)
from orksync.sync import hold_reclassified

CRD = ObjRef(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition",
             name="widgets.test.orksync.io")
SHOP = ObjRef(api_version="test.orksync.io/v1", kind="Widget", namespace="a", name="shop")
GADGET = ObjRef(api_version="test.orksync.io/v1", kind="Gadget", namespace="a", name="g")
SETTINGS = ObjRef(api_version="v1", kind="ConfigMap", namespace="a", name="settings")
KATALOG_ERROR = InputError("file './crd.yaml' does not exist", file="katalog.yaml", line=7,
                           path="spec.crds.widget.crdFile", obj="Katalog/widgets")


def plain(ref: ObjRef) -> RenderedObject:
    return RenderedObject(ref=ref, body={"metadata": {"name": ref.name}},
                          policy=WritePolicy.APPLY, origin=Origin(file=f"{ref.name}.yaml"),
                          stage=STAGE_PLAIN)


def test_a_plain_manifest_the_inventory_knows_as_a_custom_resource_is_held() -> None:
    rendered = RenderedSet(objects=(plain(SHOP), plain(SETTINGS)), errors=(KATALOG_ERROR,))
    old = Inventory.of([InventoryEntry(ref=SHOP), InventoryEntry(ref=CRD)])
    kept, changes = hold_reclassified(rendered, old)
    assert [o.ref for o in kept.objects] == [SETTINGS]
    (change,) = changes
    assert change.ref == SHOP and change.action is Action.FAILED
    assert change.message == (
        "held, not applied as a plain manifest (shop.yaml): the inventory records Widget "
        "(test.orksync.io) as a custom resource kind, and no Katalog entry of this sync "
        f"handles it; the render has errors: {KATALOG_ERROR}. It is neither applied nor "
        "pruned, and keeps its finalizer and its children, until a Katalog entry handles "
        "its kind again")


def test_a_plain_manifest_of_the_group_of_a_recorded_crd_is_held() -> None:
    rendered = RenderedSet(objects=(plain(GADGET), plain(SETTINGS)))
    kept, changes = hold_reclassified(rendered, Inventory.of([InventoryEntry(ref=CRD)]))
    assert [o.ref for o in kept.objects] == [SETTINGS]
    assert [c.ref for c in changes] == [GADGET]
    assert "its group is that of widgets.test.orksync.io, a CustomResourceDefinition this " \
        "sync root applied" in changes[0].message
    # the inventory's plain manifests and children decide nothing
    old = Inventory.of([InventoryEntry(ref=SHOP, plain=True),
                        InventoryEntry(ref=GADGET, owner=SHOP)])
    assert hold_reclassified(rendered, old) == (rendered, [])


def test_a_teardown_without_its_on_delete_waits_while_the_render_has_errors() -> None:
    hooks: dict[tuple[str, str], Any] = {("test.orksync.io/v1", "Widget"): object()}
    assert teardown_waits(hooks, SHOP, [KATALOG_ERROR]) is None  # its onDelete is known
    assert teardown_waits({}, SHOP, []) is None  # no error: its Katalog left Git
    waits = teardown_waits({}, SHOP, [LoadError("invalid YAML", file="x.yaml"), KATALOG_ERROR])
    assert waits == (
        "being deleted: its teardown waits, since no Katalog entry of this sync handles "
        f"Widget (test.orksync.io/v1) and the render has errors ({KATALOG_ERROR}): "
        "finished now, its onDelete would not run")
    assert teardown_waits({}, SHOP, [LoadError("invalid YAML", file="x.yaml")]) == (
        "being deleted: its teardown waits, since no Katalog entry of this sync handles "
        "Widget (test.orksync.io/v1) and the render has errors (x.yaml: invalid YAML): "
        "finished now, its onDelete would not run")

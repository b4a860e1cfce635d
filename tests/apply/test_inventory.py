"""The inventory and the prune plan: pure rules, no cluster (orksync.apply.inventory)."""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import zlib

import pytest

from orksync.apply.inventory import (
    MAX_COMPRESSED,
    Inventory,
    InventoryEntry,
    InventoryError,
    check_source,
    configmap_name,
    inventory_identity,
    ownership_problem,
    plan_prune,
    source_conflict,
)
from orksync.errors import RenderError
from orksync.model import (
    Action,
    ChangeSet,
    ObjRef,
    Origin,
    RenderedObject,
    RenderedSet,
    Source,
    WritePolicy,
)

CRD = ObjRef(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition",
             name="widgets.test.orksync.io")


def cr(name: str, ns: str = "apps") -> ObjRef:
    return ObjRef(api_version="test.orksync.io/v1", kind="Widget", namespace=ns, name=name)


def child(kind: str, name: str, ns: str = "apps") -> ObjRef:
    api = {"Deployment": "apps/v1", "ClusterRole": "rbac.authorization.k8s.io/v1"}
    return ObjRef(api_version=api.get(kind, "v1"), kind=kind, name=name,
                  namespace="" if kind in ("ClusterRole", "Namespace") else ns)


def obj(ref: ObjRef, owner: ObjRef | None = None) -> RenderedObject:
    return RenderedObject(ref=ref, body={"apiVersion": ref.api_version, "kind": ref.kind,
                                         "metadata": {"name": ref.name}},
                          policy=WritePolicy.APPLY, origin=Origin(file="x.yaml"), stage=0,
                          owner=owner)


def entry(ref: ObjRef, owner: ObjRef | None = None, uid: str | None = None) -> InventoryEntry:
    return InventoryEntry(ref=ref, owner=owner, uid=uid)


def rendered(*objects: RenderedObject, errors: tuple[Exception, ...] = (),
             skipped: tuple[tuple[ObjRef, str], ...] = ()) -> RenderedSet:
    return RenderedSet(objects=objects, errors=errors, skipped=skipped)


def applied(rs: RenderedSet, failed: tuple[ObjRef, ...] = ()) -> ChangeSet:
    changes = ChangeSet()
    for o in rs.objects:
        changes.add(o.ref, Action.FAILED if o.ref in failed else Action.UNCHANGED)
    return changes


W = cr("w")
DEPLOY = child("Deployment", "w")
SVC = child("Service", "w-svc")
CM = child("ConfigMap", "w-config")
ROLE = child("ClusterRole", "w-cluster-role")

OLD = Inventory.of([entry(CRD), entry(W, uid="u-w"), entry(DEPLOY, W), entry(SVC, W),
                    entry(CM, W)])


def full_render(*children: ObjRef) -> RenderedSet:
    return rendered(obj(CRD), obj(W), *(obj(c, W) for c in children))


# --- storage ---------------------------------------------------------------------------------


def test_an_inventory_round_trips_through_its_configmap_body() -> None:
    body = OLD.to_configmap("prod", "orksync-system")
    assert body["metadata"] == {
        "name": "orksync-inventory-prod", "namespace": "orksync-system",
        "labels": {"app.kubernetes.io/managed-by": "orksync",
                   "app.kubernetes.io/component": "inventory",
                   "orksync.io/inventory": "true"},
        "annotations": {"orksync.io/sync-name": "prod"}}
    assert body["data"]["count"] == "5"
    back = Inventory.from_configmap(json.loads(json.dumps(body)))
    assert back == OLD
    assert back.by_ref()[DEPLOY].owner == W and back.by_ref()[W].uid == "u-w"


def test_an_inventory_records_its_source_and_one_of_an_earlier_orksync_has_none() -> None:
    source = Source.of("https://git.example.com/platform.git/", "./clusters/prod/")
    assert (source.location, source.path) == ("https://git.example.com/platform.git",
                                              "clusters/prod")
    assert str(source) == "https://git.example.com/platform.git (path clusters/prod)"
    body = OLD.with_source(source).to_configmap("prod")
    assert body["metadata"]["annotations"] == {
        "orksync.io/sync-name": "prod",
        "orksync.io/source": "https://git.example.com/platform.git",
        "orksync.io/source-path": "clusters/prod"}
    back = Inventory.from_configmap(json.loads(json.dumps(body)))
    assert back.source == source and back.entries == OLD.entries
    assert back != OLD  # a source recorded where there was none is a change to store
    assert Inventory.from_configmap(OLD.to_configmap("prod")).source is None
    assert OLD.with_source(source).merge([entry(CM, W)]).source == source


def test_a_sync_from_another_source_is_refused_naming_both_and_the_flag() -> None:
    a, b = Source.of("/srv/repo-a"), Source.of("/srv/repo-b")
    stored = OLD.with_source(a)
    assert source_conflict(stored, a) is None
    assert source_conflict(OLD, b) is None  # no source recorded: adopted
    assert source_conflict(Inventory(source=a), b) is None  # nothing to lose
    check_source(stored, None, name="default")  # a source not known checks nothing
    with pytest.raises(InventoryError) as refused:
        check_source(stored, b, name="default", namespace="ops")
    message = str(refused.value)
    assert message.startswith("ConfigMap/ops/orksync-inventory-default: this inventory holds "
                              "5 object(s) synced from /srv/repo-a, not from /srv/repo-b: "
                              "refusing to sync")
    assert "--name" in message and "--adopt-inventory" in message
    # the path inside a repository is part of the source
    url = "https://git.example.com/platform.git"
    assert source_conflict(OLD.with_source(Source.of(url, "a")), Source.of(url, "b"))


def test_the_stored_bytes_depend_on_the_content_only() -> None:
    shuffled = list(OLD)
    random.Random(3).shuffle(shuffled)
    assert Inventory.of(shuffled).to_configmap("a") == OLD.to_configmap("a")


def test_the_entries_are_kept_in_the_order_of_their_identities() -> None:
    """The order `Inventory.of` sorts by is the entries' own (their dataclass order, which
    their unique refs decide), over refs that differ in each field in turn."""
    refs = [ObjRef(api_version=v, kind=k, namespace=ns, name=n)
            for v in ("apps/v1", "v1", "example.io/v1")
            for k in ("Service", "ConfigMap", "Deployment")
            for ns in ("", "b", "a") for n in ("z", "x-1", "x")]
    entries = [entry(ref, W if i % 2 else None, uid=str(i)) for i, ref in enumerate(refs)]
    random.Random(5).shuffle(entries)
    assert list(Inventory.of(entries)) == sorted(entries)
    assert [e.ref for e in Inventory.of(entries)] == sorted(refs)


def test_ten_thousand_entries_fit_one_configmap_compressed() -> None:
    owners = [cr(f"w{i}", f"team-{i % 50}") for i in range(1000)]
    entries = [entry(o, uid=f"{i:08x}-0000-4000-8000-{i:012x}") for i, o in enumerate(owners)]
    for i in range(9000):
        owner = owners[i % 1000]
        entries.append(entry(child(("Deployment", "Service", "ConfigMap")[i % 3],
                                   f"{owner.name}-child-{i}", owner.namespace), owner))
    inventory = Inventory.of(entries)
    assert len(inventory) == 10_000
    raw = json.dumps([[*(e.ref.api_version, e.ref.kind, e.ref.namespace, e.ref.name),
                       str(e.owner), e.uid] for e in inventory])
    assert len(raw) > 900_000  # about 1 MB uncompressed: over the limit without zlib
    body = inventory.to_configmap("big")
    size = len(json.dumps(body))
    assert size < 1024 * 1024 and len(base64.b64decode(body["binaryData"]["entries"])) < \
        MAX_COMPRESSED
    assert Inventory.from_configmap(body) == inventory


def test_a_missing_inventory_is_empty_and_a_corrupt_one_is_an_error() -> None:
    assert len(Inventory.from_configmap(None)) == 0
    body = OLD.to_configmap("x")
    body["binaryData"]["entries"] = base64.b64encode(b"not zlib").decode()
    with pytest.raises(InventoryError, match="unreadable inventory"):
        Inventory.from_configmap(body)
    body["data"]["format"] = "v9: something newer"
    with pytest.raises(InventoryError, match="unknown inventory format"):
        Inventory.from_configmap(body)


def test_configmap_names_are_valid_and_distinct() -> None:
    assert configmap_name("prod") == "orksync-inventory-prod"
    odd = configmap_name("Team_A/Prod")
    assert odd.startswith("orksync-inventory-team-a-prod-") and odd != configmap_name("team-a-prod")
    assert len(configmap_name("x" * 400)) <= 253


# --- ownership at delete time ----------------------------------------------------------------


def live(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    return {"metadata": {"labels": labels, "annotations": annotations or {}}}


OURS = {"app.kubernetes.io/managed-by": "orksync", "orkestra-owner": "w"}


def test_ownership_is_rechecked_on_the_live_object() -> None:
    marked = {"orksync.io/owner": str(W)}
    assert ownership_problem(live(OURS, marked), W) is None
    assert str(ownership_problem(live({"orkestra-owner": "w"}, marked), W)) == \
        "not deleted: label app.kubernetes.io/managed-by is not orksync any more"
    assert str(ownership_problem(live({**OURS, "orkestra-owner": "other"}, marked), W)) == \
        "not deleted: label orkestra-owner does not name w"
    assert str(ownership_problem(live(OURS, {}), W)) == \
        f"not deleted: annotation orksync.io/owner does not name {W}"
    assert str(ownership_problem(live(OURS, {**marked, "orksync.io/prune": "disabled"}), W)) \
        == "not deleted: annotated orksync.io/prune: disabled"
    assert ownership_problem(live({"app.kubernetes.io/managed-by": "orksync"}), None) is None
    assert ownership_problem(live({"app.kubernetes.io/managed-by": "helm"}), None)


def test_an_object_another_sync_root_wrote_last_is_not_deleted() -> None:
    ours, theirs = inventory_identity("a"), inventory_identity("b", "ops")
    assert (ours, theirs) == ("orksync-system/a", "ops/b")
    marked = {"orksync.io/owner": str(W)}
    assert ownership_problem(live(OURS, {**marked, "orksync.io/inventory": ours}), W,
                             ours) is None
    assert ownership_problem(live(OURS, {**marked, "orksync.io/inventory": theirs}), W,
                             ours) == ("not deleted: annotation orksync.io/inventory names "
                                       "the inventory ops/b, not orksync-system/a (another "
                                       "sync root wrote it last)")
    cr_live = live({"app.kubernetes.io/managed-by": "orksync"},
                   {"orksync.io/inventory": theirs})
    assert ownership_problem(cr_live, None, ours)
    # written by an earlier orksync (no annotation): judged by the other markers
    assert ownership_problem(live(OURS, marked), W, ours) is None


# --- the plan ----------------------------------------------------------------------------------


def test_only_objects_that_left_the_render_are_pruned() -> None:
    rs = full_render(DEPLOY, SVC)
    plan = plan_prune(OLD, rs, applied(rs))
    assert [e.ref for e in plan.delete] == [CM]
    assert not plan.refused and not plan.halted
    assert plan.keep.refs() == {CRD, W, DEPLOY, SVC}
    assert plan.keep.by_ref()[W].uid == "u-w"  # a known UID is carried over


def test_a_render_with_errors_prunes_nothing_and_forgets_nothing() -> None:
    new = child("Secret", "w-secret")
    rs = rendered(obj(CRD), obj(W), obj(new, W), errors=(RenderError("boom"),))
    plan = plan_prune(OLD, rs, applied(rs))
    assert plan.delete == [] and plan.halted
    assert plan.refused == ["the render had 1 error(s): nothing is pruned"]
    assert plan.keep.refs() == OLD.refs() | {new}


def test_a_failed_change_prunes_nothing_and_keeps_old_and_applied() -> None:
    new, broken = child("Secret", "w-secret"), child("Secret", "w-broken")
    rs = full_render(DEPLOY, new, broken)
    plan = plan_prune(OLD, rs, applied(rs, failed=(broken,)))
    assert plan.delete == [] and plan.halted
    assert "1 object(s) failed to apply" in plan.refused[0]
    assert plan.keep.refs() == OLD.refs() | {new}  # the failed new object was never applied


def test_an_empty_render_refuses_to_prune_everything_unless_allowed() -> None:
    rs = rendered()
    plan = plan_prune(OLD, rs, applied(rs))
    assert plan.delete == [] and plan.halted and plan.keep == OLD
    assert "render is empty and the inventory holds 5" in plan.refused[0]
    assert plan.refused[0].endswith("run again with --allow-empty") and plan.empty
    allowed = plan_prune(OLD, rs, applied(rs), allow_empty=True, prune_crds=True)
    assert [e.ref for e in allowed.delete] == [W, CRD]
    assert {e.ref for e in allowed.owned[W]} == {DEPLOY, SVC, CM}
    assert len(allowed.keep) == 0
    assert plan_prune(Inventory(), rs, applied(rs)).refused == []  # nothing to lose


def test_a_custom_resource_that_renders_no_children_keeps_the_ones_it_had() -> None:
    rs = rendered(obj(CRD), obj(W))
    plan = plan_prune(OLD, rs, applied(rs))
    assert plan.delete == []
    assert plan.refused == [f"{W} renders no children where it had 3: refusing to prune "
                            "them (allow orphaning children to confirm)"]
    assert plan.keep.refs() == OLD.refs()
    allowed = plan_prune(OLD, rs, applied(rs), allow_orphaning_children=True)
    assert {e.ref for e in allowed.delete} == {DEPLOY, SVC, CM}


def test_children_kept_because_their_condition_turned_false_are_not_an_orphaning() -> None:
    """Entries never cleaned up (Jobs, onCreate without reconcile) whose condition is false:
    kept in the inventory, and the custom resource does not count as rendering nothing."""
    rs = RenderedSet(objects=(obj(CRD), obj(W)),
                     retained=tuple((c, W) for c in (DEPLOY, SVC, CM)))
    plan = plan_prune(OLD, rs, applied(rs))
    assert (plan.delete, plan.refused) == ([], [])
    assert plan.keep.refs() == OLD.refs()


def test_crds_are_kept_unless_crd_pruning_is_enabled() -> None:
    rs = rendered(obj(W), *(obj(c, W) for c in (DEPLOY, SVC, CM)))
    plan = plan_prune(OLD, rs, applied(rs))
    assert plan.delete == [] and CRD in plan.keep
    assert "CRDs are not pruned" in plan.refused[0]
    assert [e.ref for e in plan_prune(OLD, rs, applied(rs), prune_crds=True).delete] == [CRD]


def test_the_children_of_a_custom_resource_being_deleted_are_left_to_its_teardown() -> None:
    other = cr("x")
    old = OLD.merge([entry(other), entry(child("Deployment", "x"), other), entry(ROLE, other)])
    rs = full_render(DEPLOY, SVC, CM)
    plan = plan_prune(old, rs, applied(rs))
    assert [e.ref for e in plan.delete] == [other]
    assert {e.ref for e in plan.owned[other]} == {child("Deployment", "x"), ROLE}
    assert plan.custom_resources == {other}
    assert other not in plan.keep and ROLE not in plan.keep


def test_deletes_run_in_reverse_apply_order() -> None:
    ns, secret = child("Namespace", "w-ns"), child("Secret", "w-secret")
    old = OLD.merge([entry(ns, W), entry(secret, W), entry(ROLE, W), entry(cr("gone"))])
    rs = rendered(obj(W), obj(child("Pod", "keep"), W))
    plan = plan_prune(old, rs, applied(rs), prune_crds=True)
    assert [e.ref for e in plan.delete] == [SVC, DEPLOY, ROLE, CM, secret, ns, cr("gone"), CRD]


def test_objects_the_namespace_guard_refused_are_not_pruned() -> None:
    refused_cr = cr("r", "kube-system")
    old = OLD.merge([entry(refused_cr), entry(child("Service", "r", "kube-system"), refused_cr)])
    reason = "namespace kube-system is restricted by the Katalog (kube-*)"
    rs = rendered(obj(CRD), obj(W), *(obj(c, W) for c in (DEPLOY, SVC)),
                  skipped=((refused_cr, reason), (CM, reason)))
    plan = plan_prune(old, rs, applied(rs))
    assert plan.delete == [] and not plan.halted
    assert plan.keep.refs() == old.refs()
    assert f"{CM}: not pruned: {reason}" in plan.refused


def test_the_ca_secret_of_a_tls_secret_is_recorded_kept_and_pruned_with_it() -> None:
    tls, ca = child("Secret", "w-tls"), child("Secret", "w-tls-ca")
    tls_obj = dataclasses.replace(obj(tls, W), directives={"tls": {"commonName": "w"}})
    first = rendered(obj(CRD), obj(W), obj(DEPLOY, W), tls_obj)
    plan = plan_prune(Inventory.of([]), first, applied(first))
    assert plan.keep.by_ref()[ca].owner == W  # recorded with its owner
    with_ca = plan.keep
    # rendered again: kept; retained (condition false, never cleaned up): kept
    again = plan_prune(with_ca, first, applied(first))
    assert ca in again.keep.by_ref() and not again.delete
    retained = dataclasses.replace(rendered(obj(CRD), obj(W), obj(DEPLOY, W)),
                                   retained=((tls, W),))
    kept = plan_prune(with_ca, retained, applied(retained))
    assert {e.ref for e in kept.delete} == set() and ca in kept.keep.by_ref()
    # the tls entry leaves the Katalog: both are pruned
    gone = rendered(obj(CRD), obj(W), obj(DEPLOY, W))
    pruned = plan_prune(with_ca, gone, applied(gone))
    assert {e.ref for e in pruned.delete} == {tls, ca}


# --- the file each object was applied from ----------------------------------------------------


def plain(ref: ObjRef, file: str) -> RenderedObject:
    return dataclasses.replace(obj(ref), origin=Origin(file=file), stage=3)


def test_an_inventory_records_the_file_of_what_no_custom_resource_owns() -> None:
    settings, role = child("ConfigMap", "settings"), child("ClusterRole", "reader")
    rs = rendered(obj(CRD), dataclasses.replace(obj(W), origin=Origin(file="apps/w.yaml")),
                  obj(DEPLOY, W), plain(settings, "platform/base.yaml"),
                  plain(role, "platform/rbac.yaml"))
    keep = plan_prune(Inventory(), rs, applied(rs)).keep
    assert {e.ref: e.file for e in keep} == {
        CRD: "x.yaml", W: "apps/w.yaml", DEPLOY: "", settings: "platform/base.yaml",
        role: "platform/rbac.yaml"}
    back = Inventory.from_configmap(json.loads(json.dumps(keep.to_configmap("prod"))))
    assert back == keep and back.by_ref()[settings].plain
    # the file is the row's last item, after plain and account: an older orksync reads
    # the items it knows
    rows = json.loads(zlib.decompress(keep.encode()))["entries"]
    assert [r[6:] for r in rows if r[3] == "settings"] == [[1, "", "platform/base.yaml"]]
    # an inventory written before the file was recorded reads with none
    older = {"owners": [], "entries": [[*r[:6], *r[6:8]] for r in rows if r[4] is None]}
    blob = zlib.compress(json.dumps(older).encode())
    assert {e.ref: (e.plain, e.file) for e in Inventory.decode(blob)} == {
        CRD: (False, ""), W: (False, ""), settings: (True, ""), role: (True, "")}


def test_a_file_with_an_error_says_what_it_holds_from_the_prune() -> None:
    a, b, c = (child("ConfigMap", n) for n in "abc")
    old = plan_prune(Inventory(), rs := rendered(
        plain(a, "platform/a.yaml"), plain(b, "platform/a.yaml"),
        plain(c, "platform/c.yaml"), dataclasses.replace(obj(W), origin=Origin(
            file="platform/a.yaml")), obj(DEPLOY, W)), applied(rs)).keep
    # platform/a.yaml does not load; platform/c.yaml was deleted from Git
    broken = rendered(errors=(RenderError("invalid YAML", file="platform/a.yaml", line=3),))
    plan = plan_prune(old, broken, applied(broken))
    assert plan.halted and plan.delete == []
    assert plan.refused == [
        "the render had 1 error(s): nothing is pruned",
        f"platform/a.yaml has errors in this sync: the prune of the 3 object(s) last applied "
        f"from it is held: {W}, {a}, {b} (and their children)"]
    assert plan.keep == old
    # repaired, and c's file gone: only c is pruned
    fixed = rendered(plain(a, "platform/a.yaml"), plain(b, "platform/a.yaml"),
                     dataclasses.replace(obj(W), origin=Origin(file="platform/a.yaml")),
                     obj(DEPLOY, W))
    plan = plan_prune(old, fixed, applied(fixed))
    assert [e.ref for e in plan.delete] == [c] and not plan.refused

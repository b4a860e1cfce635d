"""The semantics matrix (docs/semantics-matrix.md), key by key, against the real control
plane: onCreate keeps a hand edit and `reconcile: true` corrects it, cleanup when an entry's
condition turns false, `toNamespaces` copies under the namespace guard, ownership, delete +
recreate on an immutable change, ingress `tls.create`, NetworkPolicy profiles.

Each test puts every key (tests/kind_cases.py, one entry per key) into one Katalog and one
custom resource, so that one sync proves a behaviour for all of them at once."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.compare import is_subset
from orksync.apply.inventory import Inventory
from orksync.apply.write import RECREATE_ANNOTATION
from orksync.cluster.kube import Kube
from orksync.model import Action, ObjRef
from orksync.render.builders.profiles import NETWORK_POLICIES
from orksync.secrets.pki import certificate_matches_key, load_certificate, load_private_key
from orksync.sync import write_inventory
from tests.helpers import CRD, widget, write_repo
from tests.kind_cases import (
    CASES,
    OWNER_ANNOTATION,
    WIDGET,
    WIDGET_API,
    Cluster,
    action,
    assert_not_written,
    case_ref,
    changes_of,
    create_service_account,
    get,
    inventory_name,
    katalog,
    must,
    patch,
    prepare,
    ref,
    sync,
)

pytestmark = pytest.mark.cluster

RBAC = "rbac.authorization.k8s.io/v1"
NAMESPACED = [key for key in CASES if case_ref(key, "x").namespace]
# `custom` with metadata.namespaced false: a cluster-scoped object of any kind.
CLUSTER_CUSTOM = {"apiVersion": RBAC, "kind": "ClusterRole",
                  "metadata": {"name": "{{ .metadata.namespace }}-custom",
                               "namespaced": "false"},
                  "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}


def repo(tmp_path: Path, ns: str, box: dict[str, Any], cr_name: str = "w", **spec: object
         ) -> Path:
    return write_repo(tmp_path, {"katalog.yaml": katalog(box), "crd.yaml": CRD,
                                 "w.yaml": widget(cr_name, ns, **spec)})


def labelled(entry: dict[str, Any], **labels: str) -> dict[str, Any]:
    return {**entry, "labels": {**(entry.get("labels") or {}), **labels}}


def named(key: str, entry: dict[str, Any], name: str) -> dict[str, Any]:
    if key == "custom":
        return {**entry, "metadata": {**entry["metadata"], "name": name}}
    return {**entry, "name": name}


def widget_uid(kube: Kube, ns: str) -> str:
    return str(must(kube, ref(WIDGET_API, "Widget", "w", ns))["metadata"]["uid"])


def assert_owned(live: dict[str, Any], ns: str, uid: str) -> None:
    """Owned by Widget `w` of `ns`: label + annotation always; a controller owner reference
    only in the Widget's own namespace (W1: Kubernetes honours no other)."""
    meta = live["metadata"]
    assert meta["labels"]["orkestra-owner"] == "w"
    assert meta["annotations"][OWNER_ANNOTATION] == f"{WIDGET}/{ns}/w"
    if meta.get("namespace") == ns:
        assert meta["ownerReferences"] == [{"apiVersion": WIDGET_API, "kind": "Widget",
                                            "name": "w", "uid": uid, "controller": True,
                                            "blockOwnerDeletion": True}]
    else:
        assert "ownerReferences" not in meta


def gone_or_terminating(kube: Kube, obj: ObjRef) -> bool:
    """Deleted: absent, or held by a finalizer a controller removes (Namespace, PV, PVC)."""
    live = get(kube, obj)
    return live is None or bool(live["metadata"].get("deletionTimestamp"))


# --- onCreate: create if absent; `reconcile: true` corrects drift (every key) -------------------


@pytest.mark.parametrize("reconcile", [False, True], ids=["onCreate", "onCreate-reconcile"])
def test_an_on_create_entry_of_every_key_keeps_a_hand_edit_unless_reconciled(
        kube: Kube, cluster: Cluster, tmp_path: Path, reconcile: bool) -> None:
    """Created and owned; a label value orksync set, changed by another field manager, is
    kept under onCreate and corrected with `reconcile: true` (Jobs: kept, create only;
    Namespaces and ServiceAccounts: corrected, W6); the next sync writes nothing."""
    ns = cluster.namespace()
    prepare(kube, cluster, ns, CASES)
    flag = {"reconcile": True} if reconcile else {}
    box = {key: [labelled({**entry, **flag}, drift="no")] for key, (entry, _, _) in CASES.items()}
    box["custom"].append(labelled({**CLUSTER_CUSTOM, **flag}, drift="no"))
    objs = {key: case_ref(key, ns) for key in CASES}
    objs["custom-cluster-scoped"] = ref(RBAC, "ClusterRole", f"{ns}-custom")
    cluster.cluster_scoped.append(objs["custom-cluster-scoped"])
    root, inv = repo(tmp_path, ns, {"onCreate": box}), inventory_name()

    first = sync(kube, root, inv)
    assert not first.changes.failed, first.changes.failed
    uid = widget_uid(kube, ns)
    for key, obj in objs.items():
        assert action(first, obj) is Action.CREATED, key
        live = must(kube, obj)
        if key in CASES:
            CASES[key][2](live, ns)
        assert_owned(live, ns, uid)

    for obj in objs.values():
        patch(kube, obj, {"metadata": {"labels": {"drift": "hand"}}}, field_manager="hand-edit")
    second = sync(kube, root, inv)
    assert not second.changes.failed, second.changes.failed
    for key, obj in objs.items():
        corrected = reconcile and key != "jobs"
        expected = (Action.CONFIGURED, "no") if corrected else (Action.UNCHANGED, "hand")
        assert (action(second, obj), must(kube, obj)["metadata"]["labels"]["drift"]) == \
            expected, key

    before = {key: must(kube, obj) for key, obj in objs.items()}
    third = sync(kube, root, inv)
    assert not third.changes.failed, third.changes.failed
    for key, obj in objs.items():
        assert action(third, obj) is Action.UNCHANGED, key
        assert_not_written(before[key], must(kube, obj))


# --- cleanup when an entry's condition turns false (every key) -----------------------------------

CLEANUP = {
    # id: (block, entry flags, the inventory emptied before the second sync, deleted)
    # the inventory prune deletes what this sync root applied and no longer renders
    "onReconcile": ("onReconcile", {}, False, True),
    # Orkestra's DeleteIfOwned: objects the inventory does not record, owned by the Widget
    # (the same sync root: an object another one wrote last is not deleted)
    "reconcile-true-delete-if-owned": ("onCreate", {"reconcile": True}, True, True),
    # onCreate without reconcile never deletes (semantics §2.1), nor does the prune
    "onCreate-kept": ("onCreate", {}, False, False),
}


@pytest.mark.parametrize("case", list(CLEANUP))
def test_an_entry_whose_condition_turns_false_is_cleaned_up_only_when_reconciled(
        kube: Kube, cluster: Cluster, tmp_path: Path, case: str) -> None:
    """Per key, a lone entry under `when: flag == on`, and a pair of entries rendering the
    same name under `flag == on` and `flag == off`. Turning the flag off deletes the lone
    object when reconciled (never a Job, W7) and keeps the one the other entry claims."""
    block, flags, fresh_inventory, deleted = CLEANUP[case]
    ns = cluster.namespace()
    prepare(kube, cluster, ns, CASES)
    on, off = [{"field": "spec.flag", "equals": "on"}], [{"field": "spec.flag", "equals": "off"}]
    box: dict[str, list[dict[str, Any]]] = {}
    lone: dict[str, ObjRef] = {}
    claimed: dict[str, ObjRef] = {}
    for key, (entry, (api_version, kind, _), _) in CASES.items():
        twin = f"{ns}-twin-{key.lower()}"
        lone[key] = case_ref(key, ns)
        claimed[key] = ref(api_version, kind, twin, ns if lone[key].namespace else "")
        if not lone[key].namespace:
            cluster.cluster_scoped.append(claimed[key])
        pair = named(key, entry, "{{ .metadata.namespace }}-twin-" + key.lower())
        box[key] = [{**entry, **flags, "when": on}, {**pair, **flags, "when": on},
                    {**pair, **flags, "when": off}]
    inv = inventory_name()
    first = sync(kube, repo(tmp_path, ns, {block: box}, flag="on"), inv)
    assert not first.changes.failed, first.changes.failed
    assert {action(first, obj) for obj in [*lone.values(), *claimed.values()]} == \
        {Action.CREATED}

    if fresh_inventory:
        write_inventory(kube, Inventory(), inv)
    second = sync(kube, repo(tmp_path, ns, {block: box}, flag="off"), inv)
    assert not second.changes.failed, second.changes.failed
    for key in CASES:
        assert action(second, claimed[key]) is Action.UNCHANGED, key
        assert get(kube, claimed[key]) is not None, key
        removals = [c for c in changes_of(second, lone[key]) if c.action is Action.DELETED]
        if deleted and key != "jobs":
            assert len(removals) == 1, key
            if fresh_inventory:
                assert removals[0].message == "condition false", key
            assert gone_or_terminating(kube, lone[key]), key
        else:
            assert removals == [], key
            live = get(kube, lone[key])
            assert live is not None and not live["metadata"].get("deletionTimestamp"), key
            if not fresh_inventory:
                assert lone[key] in second.inventory, key


def test_a_block_whose_condition_turns_false_is_skipped_and_nothing_of_it_is_deleted(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    """A block's own `when` false: Orkestra skips the whole block, so nothing it wrote is
    cleaned up, under onCreate as under onReconcile; the inventory keeps it all. The
    onCreate block turns false first (while onReconcile still renders), then both."""
    ns = cluster.namespace()
    keys = {"onCreate": ["configMaps", "clusterRoles"], "onReconcile": ["deployments"]}
    prepare(kube, cluster, ns, [k for ks in keys.values() for k in ks])
    box = {block: {"when": [{"field": f"spec.{block}", "equals": "on"}],
                   **{key: [CASES[key][0]] for key in ks}}
           for block, ks in keys.items()}
    objs = [case_ref(key, ns) for ks in keys.values() for key in ks]
    inv = inventory_name()
    first = sync(kube, repo(tmp_path, ns, box, onCreate="on", onReconcile="on"), inv)
    assert {action(first, obj) for obj in objs} == {Action.CREATED}
    for flags in ({"onCreate": "off", "onReconcile": "on"},
                  {"onCreate": "off", "onReconcile": "off"}):
        result = sync(kube, repo(tmp_path, ns, box, **flags), inv)
        assert not result.changes.failed and result.refused == [], result.refused
        assert [c for c in result.changes.changes if c.action is Action.DELETED] == []
        for obj in objs:
            live = get(kube, obj)
            assert live is not None and not live["metadata"].get("deletionTimestamp"), obj
            assert obj in result.inventory, obj


# --- toNamespaces and the namespace guard (every namespaced key) -------------------------------


def test_to_namespaces_copies_of_every_namespaced_key_are_owned_and_a_refused_target_skipped(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    """Targets: the Widget's own namespace (owner reference), another allowed one (label +
    annotation only) and one outside `allowedNamespaces` (skipped with the reason)."""
    suffix = uuid.uuid4().hex[:8]
    home, other, refused = f"team-{suffix}", f"team-{suffix}-b", f"other-{suffix}"
    for name in (home, other, refused):
        cluster.create_namespace(name)
    for name in (home, other):
        create_service_account(kube, name, "runner")
    box = {key: [{**CASES[key][0], "toNamespaces": [home, other, refused]}]
           for key in NAMESPACED}
    root = write_repo(tmp_path, {
        "katalog.yaml": katalog({"onReconcile": box}, allowedNamespaces=["team-*"]),
        "crd.yaml": CRD, "w.yaml": widget("w", home)})
    inv = inventory_name()
    first = sync(kube, root, inv)
    assert not first.changes.failed, first.changes.failed
    uid = widget_uid(kube, home)
    for key in NAMESPACED:
        obj = case_ref(key, home)
        for target in (home, other):
            copy = ref(obj.api_version, obj.kind, obj.name, target)
            assert action(first, copy) is Action.CREATED, (key, target)
            live = must(kube, copy)
            if target == home:
                CASES[key][2](live, home)
            assert_owned(live, home, uid)
        outside = ref(obj.api_version, obj.kind, obj.name, refused)
        (change,) = changes_of(first, outside)
        assert change.action is Action.SKIPPED, key
        assert refused in change.message and "allowedNamespaces" in change.message, key
        assert get(kube, outside) is None, key

    again = sync(kube, root, inv)
    assert not again.changes.failed, again.changes.failed
    for key in NAMESPACED:
        obj = case_ref(key, home)
        for target in (home, other):
            copy = ref(obj.api_version, obj.kind, obj.name, target)
            assert action(again, copy) is Action.UNCHANGED, (key, target)


# --- delete + recreate on an immutable change --------------------------------------------------

IMMUTABLE = {
    # key: (entry, the object, spec value before and after, the changed field of the live body)
    "clusterRoleBindings": ({"name": "{{ .metadata.namespace }}-crb",
                             "roleRef": {"name": "{{ .spec.value }}"},
                             "subjects": [{"name": "w-sa"}]},
                            ("ClusterRoleBinding", "{ns}-crb"), ("view", "edit"),
                            lambda live: live["roleRef"]["name"]),
    "pods": ({"image": "nginx:1.27", "serviceAccountName": "runner",
              "command": ["sleep", "{{ .spec.value }}"]},
             ("Pod", "w-pod"), ("10", "20"),
             lambda live: live["spec"]["containers"][0]["command"][1]),
}


@pytest.mark.parametrize("key", list(IMMUTABLE))
def test_an_immutable_change_deletes_and_recreates_the_object(
        kube: Kube, cluster: Cluster, tmp_path: Path, key: str) -> None:
    entry, (kind, name), (old, new), field = IMMUTABLE[key]
    ns = cluster.namespace()
    create_service_account(kube, ns, "runner")
    obj = ref(RBAC if kind == "ClusterRoleBinding" else "v1", kind, name.format(ns=ns),
              "" if "{ns}" in name else ns)
    if not obj.namespace:
        cluster.cluster_scoped.append(obj)
    box, inv = {"onReconcile": {key: [entry]}}, inventory_name()
    assert action(sync(kube, repo(tmp_path, ns, box, value=old), inv), obj) is Action.CREATED
    uid = must(kube, obj)["metadata"]["uid"]
    result = sync(kube, repo(tmp_path, ns, box, value=new), inv)
    (change,) = changes_of(result, obj)
    assert change.action is Action.CONFIGURED and "recreated" in change.message
    live = must(kube, obj)
    assert field(live) == new and live["metadata"]["uid"] != uid
    assert action(sync(kube, repo(tmp_path, ns, box, value=new), inv), obj) is Action.UNCHANGED


def test_a_stateful_set_claim_template_change_fails_unless_the_object_opts_in_to_recreate(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    """volumeClaimTemplates cannot change: without the opt-in the change is FAILED naming
    the server's reason and the opt-in, and the StatefulSet is untouched; with the annotation
    it is deleted (UID precondition) and created again."""
    ns, inv = cluster.namespace(), inventory_name()
    entry: dict[str, Any] = {"image": "postgres", "tag": "16",
                             "volumeClaimTemplates": [{"storageSize": "{{ .spec.size }}"}]}
    sts = ref("apps/v1", "StatefulSet", "w", ns)

    def claim_size(live: dict[str, Any]) -> str:
        return str(live["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]
                   ["storage"])

    box = {"onReconcile": {"statefulSets": [entry]}}
    assert action(sync(kube, repo(tmp_path, ns, box, size="1Gi"), inv), sts) is Action.CREATED
    uid = must(kube, sts)["metadata"]["uid"]
    refused = sync(kube, repo(tmp_path, ns, box, size="2Gi"), inv)
    (change,) = changes_of(refused, sts)
    assert change.action is Action.FAILED
    assert "Forbidden" in change.message and RECREATE_ANNOTATION in change.message
    live = must(kube, sts)
    assert (live["metadata"]["uid"], claim_size(live)) == (uid, "1Gi")

    opted = {"onReconcile": {"statefulSets": [
        {**entry, "annotations": {RECREATE_ANNOTATION: "true"}}]}}
    recreated = sync(kube, repo(tmp_path, ns, opted, size="2Gi"), inv)
    (change,) = changes_of(recreated, sts)
    assert change.action is Action.CONFIGURED and "recreated" in change.message
    live = must(kube, sts)
    assert live["metadata"]["uid"] != uid and claim_size(live) == "2Gi"


# --- Ingress tls.create, NetworkPolicy profiles ------------------------------------------------


def test_an_ingress_with_tls_create_gets_a_tls_secret_for_its_host_before_it(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns, inv = cluster.namespace(), inventory_name()
    box = {"onReconcile": {"ingresses": [{"host": "w.example.com", "serviceName": "w-svc",
                                          "servicePort": "80", "tls": {"create": "true"}}]}}
    root = repo(tmp_path, ns, box)
    secret, ingress = ref("v1", "Secret", "w-tls", ns), \
        ref("networking.k8s.io/v1", "Ingress", "w-ingress", ns)
    first = sync(kube, root, inv)
    assert not first.changes.failed, first.changes.failed
    order = [c.ref for c in first.changes.changes]
    assert action(first, secret) is Action.CREATED and action(first, ingress) is Action.CREATED
    assert order.index(secret) < order.index(ingress)
    assert must(kube, ingress)["spec"]["tls"] == [{"hosts": ["w.example.com"],
                                                  "secretName": "w-tls"}]
    live = must(kube, secret)
    assert live["type"] == "kubernetes.io/tls"
    assert_owned(live, ns, widget_uid(kube, ns))
    data = {k: base64.b64decode(v) for k, v in live["data"].items()}
    cert = load_certificate(data["tls.crt"])
    assert cert.common_name == "w.example.com" and "w.example.com" in cert.dns_names
    assert certificate_matches_key(cert, load_private_key(data["tls.key"]))

    again = sync(kube, root, inv)
    assert action(again, secret) is Action.UNCHANGED
    assert must(kube, secret)["data"] == live["data"]


def test_every_network_policy_profile_is_synced_and_then_left_unchanged(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns, inv = cluster.namespace(), inventory_name()
    box = {"onReconcile": {"networkPolicies": [{"name": f"p-{name}", "profile": name}
                                               for name in NETWORK_POLICIES]}}
    root = repo(tmp_path, ns, box)
    policies = {name: ref("networking.k8s.io/v1", "NetworkPolicy", f"p-{name}", ns)
                for name in NETWORK_POLICIES}
    first = sync(kube, root, inv)
    assert not first.changes.failed, first.changes.failed
    for name, obj in policies.items():
        assert action(first, obj) is Action.CREATED, name
        spec = must(kube, obj)["spec"]
        assert spec["policyTypes"] == NETWORK_POLICIES[name]["policyTypes"], name
        assert is_subset(NETWORK_POLICIES[name], spec), (name, spec)
        assert spec["podSelector"] == {}, name
    again = sync(kube, root, inv)
    assert {action(again, obj) for obj in policies.values()} == {Action.UNCHANGED}

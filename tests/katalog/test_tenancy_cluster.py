"""Multi-tenancy end to end against the real control plane (docs/multi-tenancy.md): each
attack a hostile custom resource can make through its Katalog is refused, reported as
`skipped` naming the custom resource and the entry, leaves nothing in the cluster, and the
rest of the repository still syncs. The offline rules are tests/katalog/test_tenancy.py."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.katalog.loader import load_repository
from orksync.lifecycle.events import report_sync
from orksync.model import Action, ObjRef
from orksync.render.engine import render_catalog
from orksync.sync import SyncRequest, SyncResult, sync_once
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, widget, write_repo
from tests.kind_cases import (
    WIDGET_API,
    Cluster,
    action,
    changes_of,
    get,
    inventory_name,
    katalog,
    must,
    ref,
    sync,
)

pytestmark = pytest.mark.cluster

CRB_API = "rbac.authorization.k8s.io/v1"
GADGET_GROUP = "tenancy.orksync.io"
BENIGN = {"name": "{{ .metadata.name }}-benign", "data": {"ok": "yes"}}


def hostile_repo(tmp_path: Path, ns: str, box: dict[str, Any], spec: dict[str, Any],
                 **entry: Any) -> Path:
    """A Katalog whose entry also writes a benign ConfigMap, a hostile Widget `w` and a
    well-behaved sibling Widget `good` in the tenant namespace `ns`. Only `w` renders the
    entries of `box`."""
    only_w = [{"field": "metadata.name", "equals": "w"}]
    box = {block: {key: [{**item, "when": only_w} for item in items]
                   for key, items in entries.items()} for block, entries in box.items()}
    box = {**box, "onReconcile": {**box.get("onReconcile", {}), "configMaps": [BENIGN]}}
    return write_repo(tmp_path, {"katalog.yaml": katalog(box, **entry), "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, **spec),
                                 "good.yaml": widget("good", ns)})


def assert_refused(result: SyncResult, refused: ObjRef, ns: str, entry: str) -> str:
    """`refused` was skipped with a reason naming the hostile custom resource and its
    entry; everything else was written; nothing failed."""
    assert not result.changes.failed, result.changes.failed
    (change,) = changes_of(result, refused)
    assert change.action is Action.SKIPPED
    assert change.message.startswith(f"Widget.test.orksync.io/{ns}/w {entry}: "), change.message
    written = (Action.CREATED, Action.UNCHANGED)  # unchanged: written by an earlier sync
    for owner in ("w", "good"):
        assert action(result, ref("v1", "ConfigMap", f"{owner}-benign", ns)) in written
    assert action(result, ref(WIDGET_API, "Widget", "good", ns)) in written
    return change.message


def _attack_to_namespaces(ns: str, victim: str) -> tuple[dict[str, Any], dict[str, Any],
                                                         ObjRef, str]:
    box = {"onReconcile": {"secrets": [{"name": "planted", "data": {"k": "v"},
                                        "toNamespaces": ["{{ .spec.targets }}"]}]}}
    return (box, {"targets": f"[{ns}, {victim}]"}, ref("v1", "Secret", "planted", victim),
            "onReconcile.secrets[0]")


def _attack_custom_into_another_namespace(ns: str, victim: str) -> tuple[
        dict[str, Any], dict[str, Any], ObjRef, str]:
    box = {"onReconcile": {"custom": [
        {"apiVersion": "{{ .spec.api }}", "kind": "{{ .spec.kind }}",
         "metadata": {"name": "planted", "namespace": "{{ .spec.where }}"},
         "data": {"k": "v"}}]}}
    spec = {"api": "v1", "kind": "ConfigMap", "where": victim}
    return box, spec, ref("v1", "ConfigMap", "planted", victim), "onReconcile.custom[0]"


def _attack_cluster_admin_binding(ns: str, victim: str) -> tuple[
        dict[str, Any], dict[str, Any], ObjRef, str]:
    name = f"pwned-{ns}"
    box = {"onReconcile": {"custom": [
        {"apiVersion": "{{ .spec.api }}", "kind": "{{ .spec.kind }}",
         "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "cluster-admin"},
         "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]}]}}
    spec = {"api": CRB_API, "kind": "ClusterRoleBinding"}
    return box, spec, ref(CRB_API, "ClusterRoleBinding", name), "onReconcile.custom[0]"


def _attack_namespace_outside_the_guard(ns: str, victim: str) -> tuple[
        dict[str, Any], dict[str, Any], ObjRef, str]:
    box = {"onCreate": {"namespaces": [{"name": "{{ .spec.claim }}"}]}}
    claim = f"{victim}-claimed"
    return box, {"claim": claim}, ref("v1", "Namespace", claim), "onCreate.namespaces[0]"


def _attack_namespace_as_a_custom_kind(ns: str, victim: str) -> tuple[
        dict[str, Any], dict[str, Any], ObjRef, str]:
    claim = f"{ns}-extra"  # inside the guard's patterns: the kind itself is what is refused
    box = {"onCreate": {"custom": [{"apiVersion": "v1", "kind": "{{ .spec.kind }}",
                                    "metadata": {"name": "{{ .spec.claim }}"}}]}}
    return (box, {"kind": "Namespace", "claim": claim}, ref("v1", "Namespace", claim),
            "onCreate.custom[0]")


def _attack_secret_exfiltration(ns: str, victim: str) -> tuple[
        dict[str, Any], dict[str, Any], ObjRef, str]:
    box = {"onReconcile": {"secrets": [{"name": "loot", "fromSecret": "{{ .spec.secret }}",
                                        "fromNamespace": "{{ .spec.from }}"}]}}
    return (box, {"secret": "admin-token", "from": victim}, ref("v1", "Secret", "loot", ns),
            "onReconcile.secrets[0]")


ATTACKS = {
    "to-namespaces-into-a-refused-namespace": _attack_to_namespaces,
    "custom-configmap-into-another-namespace": _attack_custom_into_another_namespace,
    "custom-cluster-role-binding-to-cluster-admin": _attack_cluster_admin_binding,
    "namespace-named-outside-the-guard": _attack_namespace_outside_the_guard,
    "namespace-through-a-templated-custom-kind": _attack_namespace_as_a_custom_kind,
    "secret-copied-from-a-refused-namespace": _attack_secret_exfiltration,
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_each_attack_is_refused_reported_and_the_rest_syncs(
        kube: Kube, cluster: Cluster, tmp_path: Path, attack: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    ns, victim = f"tn-{suffix}", f"vc-{suffix}"
    cluster.create_namespace(ns)
    cluster.create_namespace(victim)
    kube.create(kube.resource("v1", "Secret"), {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "admin-token",
                                                           "namespace": victim},
        "stringData": {"token": "do-not-copy"}}, field_manager="orksync-tests")
    box, spec, refused, entry = ATTACKS[attack](ns, victim)
    if not refused.namespace:
        cluster.cluster_scoped.append(refused)  # removed afterwards should it ever appear
    root = hostile_repo(tmp_path, ns, box, spec, allowedNamespaces=[f"tn-{suffix}*"])
    result = sync(kube, root, inventory_name())
    message = assert_refused(result, refused, ns, entry)
    assert get(kube, refused) is None, f"{attack}: {refused} was written"
    assert "do-not-copy" not in message


def test_a_cluster_scoped_kind_only_the_api_server_knows_is_refused_at_apply(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    """Gadget's CRD is not in the repository, so the render cannot know its scope: the
    applier refuses it once discovery says it is cluster-scoped, and only then."""
    install_cluster_scoped_crd(kube)
    ns = cluster.namespace("tn")
    name = f"gadget-{ns}"
    gadget = ref(f"{GADGET_GROUP}/v1", "Gadget", name)
    cluster.cluster_scoped.append(gadget)
    box = {"onReconcile": {"custom": [{"apiVersion": "{{ .spec.api }}",
                                       "kind": "{{ .spec.kind }}",
                                       "metadata": {"name": name}, "spec": {"size": "1"}}]}}
    spec = {"api": f"{GADGET_GROUP}/v1", "kind": "Gadget"}
    inv = inventory_name()
    result = sync(kube, hostile_repo(tmp_path / "a", ns, box, spec), inv)
    rendered_ref = ref(f"{GADGET_GROUP}/v1", "Gadget", name, ns)  # the render's guess
    message = assert_refused(result, rendered_ref, ns, "onReconcile.custom[0]")
    assert "Gadget (tenancy.orksync.io) is cluster-scoped" in message
    assert get(kube, gadget) is None

    allowed = hostile_repo(tmp_path / "b", ns, box, spec,
                           allowedClusterScopedKinds=[f"Gadget.{GADGET_GROUP}"])
    again = sync(kube, allowed, inv)
    assert not again.changes.failed, again.changes.failed
    assert action(again, rendered_ref) is Action.CREATED
    assert must(kube, gadget)["spec"] == {"size": 1}


def test_an_existing_cluster_role_is_not_taken_over(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    """Server-side apply would force Katalog-written rules and orksync's ownership
    markers onto a ClusterRole nobody gave the custom resource; the next prune would then
    delete it."""
    ns = cluster.namespace("tn")
    victim = ref(CRB_API, "ClusterRole", f"victim-{ns}")
    cluster.cluster_scoped.append(victim)
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    kube.create(kube.resource(CRB_API, "ClusterRole"), {
        "apiVersion": CRB_API, "kind": "ClusterRole", "metadata": {"name": victim.name},
        "rules": rules}, field_manager="orksync-tests")
    box = {"onReconcile": {"clusterRoles": [{"name": "{{ .spec.role }}", "rules": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}]}}
    inv = inventory_name()
    result = sync(kube, hostile_repo(tmp_path / "a", ns, box, {"role": victim.name}), inv)
    assert not result.changes.failed, result.changes.failed
    (change,) = changes_of(result, victim)
    assert change.action is Action.SKIPPED
    assert "belongs to no custom resource" in change.message
    live = must(kube, victim)
    assert live["rules"] == rules and "labels" not in live["metadata"]

    own = ref(CRB_API, "ClusterRole", f"own-{ns}")
    cluster.cluster_scoped.append(own)
    fresh = hostile_repo(tmp_path / "b", ns, box, {"role": own.name})
    assert action(sync(kube, fresh, inv), own) is Action.CREATED
    assert action(sync(kube, fresh, inv), own) is Action.UNCHANGED  # its own: no refusal


def test_a_refusal_never_prunes_what_was_written_before(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.namespace("tn")
    extra = ref("v1", "Namespace", f"{ns}-w")  # named after `w` alone: no sibling claims it
    cluster.cluster_scoped.append(extra)
    box = {"onCreate": {"namespaces": [{"name": "{{ .metadata.namespace }}-{{ .metadata.name }}"}]}}
    inv = inventory_name()
    first = sync(kube, hostile_repo(tmp_path / "a", ns, box, {}), inv)
    assert action(first, extra) is Action.CREATED  # the literal default allows it

    tightened = hostile_repo(tmp_path / "b", ns, box, {}, allowedClusterScopedKinds=[])
    second = sync(kube, tightened, inv)
    message = assert_refused(second, extra, ns, "onCreate.namespaces[0]")
    assert "allowedClusterScopedKinds (empty)" in message
    assert any(str(extra) in reason and "not pruned" in reason for reason in second.refused)
    assert not [c for c in second.changes.changes if c.action is Action.DELETED]
    live = must(kube, extra)
    assert not live["metadata"].get("deletionTimestamp")


def test_strict_cluster_scope_on_the_command_line(
        control_plane: ControlPlane, kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.namespace("tn")
    role = ref(CRB_API, "ClusterRole", f"{ns}-reader")
    cluster.cluster_scoped.append(role)
    box = {"onReconcile": {"clusterRoles": [{"name": "{{ .metadata.namespace }}-reader",
                                             "rules": [{"apiGroups": [""],
                                                        "resources": ["pods"],
                                                        "verbs": ["get"]}]}]}}
    repo = hostile_repo(tmp_path / "repo", ns, box, {})
    common = ["sync", str(repo), "--once", "--kubeconfig", str(control_plane.kubeconfig),
              "--name", inventory_name()]
    strict = cli(*common, "--strict-cluster-scope")
    assert strict.returncode == 0, strict.stderr
    assert f"{role}" in strict.stderr and "--strict-cluster-scope: none allowed" in strict.stderr
    assert get(kube, role) is None
    assert get(kube, ref("v1", "ConfigMap", "good-benign", ns)) is not None
    relaxed = cli(*common)
    assert relaxed.returncode == 0, relaxed.stderr
    assert must(kube, role)["rules"][0]["verbs"] == ["get"]


# --- helpers -----------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=180)


def install_cluster_scoped_crd(kube: Kube) -> None:
    """A cluster-scoped CRD installed behind the repository's back (once per session)."""
    res = kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    name = f"gadgets.{GADGET_GROUP}"
    if kube.get_or_none(res, "", name) is None:
        kube.create(res, {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": GADGET_GROUP, "scope": "Cluster",
                     "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}},
            field_manager="orksync-tests")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        conditions = (kube.get(res, "", name).get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            kube.forget(f"{GADGET_GROUP}/v1")
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} not Established")


def test_a_refusal_reaches_the_tenant_in_status_and_one_warning_event(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    """The hostile custom resource's status lists what was refused and why; a Warning
    Event says so when the list changes, not again at every sync; it clears when fixed."""
    ns = cluster.namespace("tn")
    crb = ref(CRB_API, "ClusterRoleBinding", f"{ns}-admin")
    cluster.cluster_scoped.append(crb)
    box = {"onReconcile": {"custom": [{
        "apiVersion": "{{ .spec.api }}", "kind": "{{ .spec.kind }}",
        "metadata": {"name": f"{ns}-admin", "namespaced": "false"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]}]}}
    spec = {"api": CRB_API, "kind": "ClusterRoleBinding"}
    hostile = hostile_repo(tmp_path / "a", ns, box, spec)

    def report(root: Path) -> dict[str, Any]:
        catalog = load_repository(root)
        rendered = render_catalog(catalog)
        result = sync_once(kube, SyncRequest(rendered, inventory_name=inv))
        report_sync(kube, catalog, rendered, result.changes, revision="r1")
        return must(kube, ref(WIDGET_API, "Widget", "w", ns))

    def refused_events(uid: str) -> list[dict[str, Any]]:
        return [e for e in kube.list(kube.resource("v1", "Event"), namespace=ns)
                if e["involvedObject"].get("uid") == uid and e["reason"] == "WidgetRefused"]

    inv = inventory_name()
    live = report(hostile)
    (reason,) = live["status"]["orksync"]["refused"]
    assert reason.startswith(f"{crb}: Widget.test.orksync.io/{ns}/w onReconcile.custom[0]: ")
    assert "allowedClusterScopedKinds" in reason
    (event,) = refused_events(live["metadata"]["uid"])
    assert event["type"] == "Warning" and reason in event["message"]
    good = must(kube, ref(WIDGET_API, "Widget", "good", ns))
    assert "refused" not in good["status"]["orksync"]  # the sibling is not blamed

    again = report(hostile)
    assert again["status"]["orksync"]["refused"] == [reason]
    assert len(refused_events(live["metadata"]["uid"])) == 1  # unchanged: no new Event

    fixed = report(hostile_repo(tmp_path / "b", ns, {}, {}))
    assert "refused" not in fixed["status"]["orksync"]
    assert get(kube, crb) is None

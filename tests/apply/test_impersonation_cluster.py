"""The second wall (docs/multi-tenancy.md) on the real control plane: a Katalog entry's
serviceAccountName makes every write, delete and read of its custom resources' children
go out as that ServiceAccount, so the cluster's RBAC decides them; the kube-apiserver's
audit log says who each request was authorized as. The custom resources, their status
and Events stay the agent's. The overlay deploy/overlays/impersonation is proven enough
for the bundled example under --default-service-account."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orksync.apply.diff import diff_objects
from orksync.apply.impersonation import Identities, Impersonation
from orksync.apply.secrets import rotate_due
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError, LeadershipLost
from orksync.katalog.loader import load_repository
from orksync.lifecycle.events import report_sync
from orksync.model import Action
from orksync.render.engine import render_catalog
from orksync.secrets.random import CryptoRandom
from orksync.sync import (
    SyncRequest,
    hook_renderers,
    mark_for_cleanup,
    recorded_accounts,
    render_live,
    sync_once,
)
from testbed.controlplane import ControlPlane
from tests.cli.test_deploy import (
    DEPLOY,
    NAMESPACE,
    RBAC_KINDS,
    ROOT,
    _env_without_kubeconfig,
    dump,
    granted,
    kubectl,
    load,
    load_text,
    service_account_kubeconfig,
)
from tests.helpers import CRD, REPO_EXAMPLE, widget, write_repo
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
)

pytestmark = pytest.mark.cluster

RBAC = "rbac.authorization.k8s.io/v1"
TENANT = "tenant"
OVERLAY = DEPLOY / "overlays" / "impersonation"


def user(namespace: str, name: str = TENANT) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def allow(kube: Kube, namespace: str, rules: list[dict[str, Any]], name: str = TENANT) -> None:
    """The ServiceAccount `name` of `namespace`, allowed `rules` there (a Role)."""
    meta = {"name": name, "namespace": namespace}
    for api_version, kind, body in (
            ("v1", "ServiceAccount", {}),
            (RBAC, "Role", {"rules": rules}),
            (RBAC, "RoleBinding", {
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name,
                              "namespace": namespace}]})):
        kube.apply(kube.resource(api_version, kind),
                   {"apiVersion": api_version, "kind": kind, "metadata": meta, **body},
                   field_manager="orksync-tests", force=True)


CONFIGMAPS_ONLY = [{"apiGroups": [""], "resources": ["configmaps"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]


def audit_events(audit_log: Path | None, *, resource: str, name: str,
                 namespace: str | None = None) -> list[dict[str, Any]]:
    """Every audited request (writes, deletes; tests/cluster_fixtures.py's policy) on the
    object `resource`/`name` (in `namespace`, when given: other tests of the session use
    the same names elsewhere), completed."""
    assert audit_log is not None
    found = []
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        target = event.get("objectRef") or {}
        if target.get("resource") == resource and target.get("name") == name and \
                event.get("stage") == "ResponseComplete" and \
                (namespace is None or target.get("namespace") == namespace):
            found.append(event)
    return found


def as_whom(event: dict[str, Any]) -> str:
    """The user the API server authorized the request as."""
    return str((event.get("impersonatedUser") or event["user"])["username"])


def tenant_repo(root: Path, a: str, b: str, *, extra_cm: bool = False) -> Path:
    """One Katalog, serviceAccountName `tenant`: every Widget writes a ConfigMap; Widget
    `a` (namespace `a`) also a ClusterRoleBinding, which the Katalog allows (the first
    wall lets it through) and tenant a's RBAC does not (the second wall refuses it)."""
    box: dict[str, Any] = {"onReconcile": {
        "configMaps": [{"name": "{{ .metadata.name }}-cm", "data": {"ok": "yes"}}],
        "custom": [{
            "apiVersion": RBAC, "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{a}-admin", "namespaced": "false"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": a}],
            "when": [{"field": "metadata.name", "equals": "a"}]}]}}
    if extra_cm:
        box["onReconcile"]["configMaps"].append(
            {"name": "{{ .metadata.name }}-extra", "data": {"ok": "yes"}})
    return write_repo(root, {"katalog.yaml": katalog(box, serviceAccountName=TENANT),
                             "crd.yaml": CRD, "a.yaml": widget("a", a),
                             "b.yaml": widget("b", b)})


@pytest.fixture
def tenants(kube: Kube, cluster: Cluster) -> tuple[str, str]:
    a, b = cluster.namespace("ta"), cluster.namespace("tb")
    for ns in (a, b):
        allow(kube, ns, CONFIGMAPS_ONLY)
    cluster.cluster_scoped.append(ref(RBAC, "ClusterRoleBinding", f"{a}-admin"))
    return a, b


def test_a_tenant_writes_as_its_service_account_and_its_rbac_refuses_the_rest(
        kube: Kube, control_plane: ControlPlane, tenants: tuple[str, str],
        tmp_path: Path) -> None:
    a, b = tenants
    root = tenant_repo(tmp_path, a, b)
    catalog = load_repository(root)
    rendered = render_live(kube, catalog)
    assert rendered.ok, rendered.errors
    result = sync_once(kube, SyncRequest(rendered, inventory_name=inventory_name(),
                                         hooks=hook_renderers(catalog)))
    report_sync(kube, catalog, rendered, result.changes, revision="r1")

    # its ConfigMap is written, as tenant a (the API server adds the ServiceAccount's
    # groups itself: orksync sends Impersonate-User only)
    must(kube, ref("v1", "ConfigMap", "a-cm", a))
    (written,) = audit_events(control_plane.audit_log, resource="configmaps", name="a-cm",
                              namespace=a)
    assert as_whom(written) == user(a) and written["responseStatus"]["code"] == 201
    assert written["impersonatedUser"]["groups"] == [
        "system:serviceaccounts", f"system:serviceaccounts:{a}", "system:authenticated"]

    # its ClusterRoleBinding is refused, naming the identity, the verb and the object
    crb = ref(RBAC, "ClusterRoleBinding", f"{a}-admin")
    (change,) = changes_of(result, crb)
    assert change.action is Action.FAILED
    assert f'clusterrolebindings.rbac.authorization.k8s.io "{a}-admin" is forbidden: User ' \
        f'"{user(a)}" cannot patch resource "clusterrolebindings"' in change.message
    assert change.message.endswith(f"(sent as {user(a)})"), change.message
    assert get(kube, crb) is None
    attempts = audit_events(control_plane.audit_log, resource="clusterrolebindings",
                            name=f"{a}-admin")
    assert attempts and {(as_whom(e), e["responseStatus"]["code"]) for e in attempts} == \
        {(user(a), 403)}  # nothing of it was sent as the agent

    # ... on the custom resource's status and as an Event (the agent's writes)
    live = must(kube, ref(WIDGET_API, "Widget", "a", a))
    ready = next(c for c in live["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and f"{crb}: " in ready["message"] \
        and user(a) in ready["message"], ready
    events = [e for e in kube.list(kube.resource("v1", "Event"), namespace=a)
              if e["involvedObject"].get("uid") == live["metadata"]["uid"]]
    assert [e["reason"] for e in events] == ["WidgetReconcileError"], events
    assert "cannot patch resource" in events[0]["message"] and user(a) in events[0]["message"]
    (status_write,) = [e for e in audit_events(control_plane.audit_log, resource="widgets",
                                               name="a", namespace=a)
                       if e.get("objectRef", {}).get("subresource") == "status"]
    assert "impersonatedUser" not in status_write  # the custom resource stays the agent's

    # the other tenant's sync is unaffected
    assert not [c for c in result.changes.failed if c.ref.namespace == b]
    assert action(result, ref("v1", "ConfigMap", "b-cm", b)) is Action.CREATED
    (other,) = audit_events(control_plane.audit_log, resource="configmaps", name="b-cm",
                            namespace=b)
    assert as_whom(other) == user(b)
    live_b = must(kube, ref(WIDGET_API, "Widget", "b", b))
    assert "orksync" in live_b["status"]

    # with a default for the entries that name none, a cluster-scoped custom resource has
    # no namespace to find it in: its children fail rather than go out as the agent
    identities = Identities(kube, Impersonation(default="deployer"))
    with pytest.raises(ClusterError, match="cluster-scoped"):
        identities.kube_for(ref("example.io/v1", "Tenant", "t"))
    assert identities.account(ref(WIDGET_API, "Widget", "w", b)) == f"{b}/deployer"


def test_an_impersonating_view_shares_the_connection_s_counters_and_gate(
        kube: Kube, tenants: tuple[str, str]) -> None:
    a, _ = tenants
    view = kube.impersonating(user(a))
    assert kube.impersonating(user(a)) is view and view.impersonating(user(a)) is view
    before = kube.requests
    list(view.list(kube.resource("v1", "ConfigMap"), namespace=a))
    assert kube.requests == before + 1  # counted on the connection it shares
    with pytest.raises(ClusterError) as refused:
        list(view.list(kube.resource("v1", "Secret"), namespace=a))
    assert refused.value.status == 403
    assert str(refused.value).endswith(f"(sent as {user(a)})")
    long = "x" * 250  # the API server's sentence names the object before the verb: kept whole
    with pytest.raises(ClusterError) as named:
        view.get(kube.resource("v1", "Secret"), a, long)
    assert f'secrets "{long}" is forbidden: User "{user(a)}" cannot get resource "secrets"' \
        in str(named.value)

    def stop() -> None:
        raise LeadershipLost("not the leader")
    kube.gate = stop
    try:
        with pytest.raises(LeadershipLost):  # the agent's write gate holds for every view
            view.get_or_none(kube.resource("v1", "ConfigMap"), a, "x")
    finally:
        kube.gate = None


def test_the_status_and_render_live_read_the_children_as_the_service_account(
        kube: Kube, tenants: tuple[str, str], tmp_path: Path) -> None:
    """Tenant a may write its ConfigMaps but not list them: its custom resource's status
    and `.children` in `render --live` show the child as its ServiceAccount sees it (not
    at all), not as the agent does."""
    a, b = tenants
    allow(kube, a, [{**CONFIGMAPS_ONLY[0], "verbs": ["get", "create", "update", "patch"]}])
    seen = "{{ if .children.configmap._placeholder }}hidden{{ else }}seen{{ end }}"
    catalog = load_repository(write_repo(tmp_path, {
        "katalog.yaml": katalog({"onReconcile": {"configMaps": [
            {"name": "{{ .metadata.name }}-cm", "data": {"ok": "yes", "seen": seen}}]}},
            serviceAccountName=TENANT),
        "crd.yaml": CRD, "a.yaml": widget("a", a), "b.yaml": widget("b", b)}))
    rendered = render_catalog(catalog)
    result = sync_once(kube, SyncRequest(rendered, inventory_name=inventory_name(),
                                         hooks=hook_renderers(catalog)))
    assert not result.changes.failed, result.changes.failed
    report_sync(kube, catalog, rendered, result.changes, revision="r1")

    def child_health(ns: str, name: str) -> str:
        live = must(kube, ref(WIDGET_API, "Widget", name, ns))
        (child,) = live["status"]["orksync"]["health"]["children"]
        return str(child["status"])

    assert child_health(a, "a") == "NotFound"  # a cannot list ConfigMaps
    assert child_health(b, "b") == "Current"

    def rendered_seen(read_as: Impersonation | None) -> dict[str, str]:
        objects = render_live(kube, catalog, read_as=read_as).objects
        return {o.ref.namespace: o.body["data"]["seen"] for o in objects
                if o.ref.kind == "ConfigMap"}

    assert rendered_seen(Impersonation()) == {a: "hidden", b: "seen"}  # render --live, diff
    assert rendered_seen(None) == {a: "seen", b: "seen"}  # the sync's own render: the agent


def test_a_prune_deletes_as_the_service_account_and_fails_where_it_may_not(
        kube: Kube, control_plane: ControlPlane, tenants: tuple[str, str],
        tmp_path: Path) -> None:
    a, b = tenants
    inv = inventory_name()
    for ns in (a, b):  # a may delete its ConfigMaps, b may not
        verbs = CONFIGMAPS_ONLY[0]["verbs"]
        allow(kube, ns, [{**CONFIGMAPS_ONLY[0],
                          "verbs": verbs if ns == a else [v for v in verbs if v != "delete"]},
                         {"apiGroups": ["rbac.authorization.k8s.io"],
                          "resources": ["clusterrolebindings"], "verbs": ["get"]}])

    def sync(root: Path) -> Any:
        catalog = load_repository(root)
        rendered = render_catalog(catalog)
        return sync_once(kube, SyncRequest(rendered, inventory_name=inv,
                                           hooks=hook_renderers(catalog)))

    first = sync(tenant_repo(tmp_path / "1", a, b, extra_cm=True))
    assert action(first, ref("v1", "ConfigMap", "b-extra", b)) is Action.CREATED
    # the failed ClusterRoleBinding halts every prune; without it the next sync prunes
    (tmp_path / "2").mkdir()
    root = tenant_repo(tmp_path / "2", a, b)
    text = (root / "katalog.yaml").read_text().replace("cluster-admin", "view")
    (root / "katalog.yaml").write_text(text.split("    custom:")[0])
    second = sync(root)
    assert action(second, ref("v1", "ConfigMap", "a-extra", a)) is Action.DELETED
    assert get(kube, ref("v1", "ConfigMap", "a-extra", a)) is None
    (deleted,) = [e for e in audit_events(control_plane.audit_log, resource="configmaps",
                                          name="a-extra", namespace=a) if e["verb"] == "delete"]
    assert as_whom(deleted) == user(a)

    (refused,) = changes_of(second, ref("v1", "ConfigMap", "b-extra", b))
    assert refused.action is Action.FAILED
    assert f'User "{user(b)}" cannot delete resource "configmaps"' in refused.message
    assert get(kube, ref("v1", "ConfigMap", "b-extra", b)) is not None
    third = sync(root)  # kept in the inventory: tried again, as b again
    assert changes_of(third, ref("v1", "ConfigMap", "b-extra", b))[0].action is Action.FAILED


def test_a_custom_resource_leaving_git_is_torn_down_as_the_service_account_that_wrote_it(
        kube: Kube, control_plane: ControlPlane, cluster: Cluster, tmp_path: Path) -> None:
    """Its cluster-scoped child (which no owner reference covers: the teardown deletes it)
    goes as the ServiceAccount recorded in the inventory, though the custom resource and
    its Katalog entry's serviceAccountName left Git together."""
    a = cluster.namespace("ta")
    allow(kube, a, CONFIGMAPS_ONLY)
    reader = ref(RBAC, "ClusterRole", f"{a}-reader")
    cluster.cluster_scoped += [reader, ref(RBAC, "ClusterRole", f"{a}-tenant"),
                               ref(RBAC, "ClusterRoleBinding", f"{a}-tenant")]
    kube.apply(kube.resource(RBAC, "ClusterRole"), {  # tenant a may manage that one
        "apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": f"{a}-tenant"},
        "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                   "resourceNames": [f"{a}-reader"],
                   "verbs": ["get", "create", "update", "patch", "delete"]},
                  {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                   "verbs": ["create"]}]}, field_manager="orksync-tests", force=True)
    kube.apply(kube.resource(RBAC, "ClusterRoleBinding"), {
        "apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": f"{a}-tenant"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": f"{a}-tenant"},
        "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": a}]},
        field_manager="orksync-tests", force=True)
    # a rule tenant a holds itself (the API server refuses to let anyone grant more)
    box = {"onReconcile": {"clusterRoles": [{"name": f"{a}-reader", "rules": [{
        "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
        "resourceNames": [f"{a}-reader"], "verbs": ["get"]}]}]}}
    inv = inventory_name()

    def sync(files: dict[str, str]) -> Any:
        catalog = load_repository(write_repo(tmp_path / str(len(list(tmp_path.iterdir()))),
                                             {"crd.yaml": CRD, **files}))
        rendered = render_catalog(catalog)
        assert rendered.ok, rendered.errors
        return sync_once(kube, SyncRequest(rendered, inventory_name=inv,
                                           hooks=hook_renderers(catalog)))

    first = sync({"katalog.yaml": katalog(box, serviceAccountName=TENANT),
                  "a.yaml": widget("a", a)})
    assert action(first, reader) is Action.CREATED
    (created,) = audit_events(control_plane.audit_log, resource="clusterroles",
                              name=f"{a}-reader")
    assert as_whom(created) == user(a)

    gone = sync({"katalog.yaml": katalog(box)})  # no Widget, no serviceAccountName
    widget_ref = ref(WIDGET_API, "Widget", "a", a)
    assert [c.action for c in changes_of(gone, widget_ref)] == [Action.DELETED], gone.changes
    assert get(kube, reader) is None
    (deleted,) = [e for e in audit_events(control_plane.audit_log, resource="clusterroles",
                                          name=f"{a}-reader") if e["verb"] == "delete"]
    assert as_whom(deleted) == user(a)


def test_rotation_writes_each_secret_as_the_service_account_recorded_for_it(
        kube: Kube, control_plane: ControlPlane, cluster: Cluster, tmp_path: Path) -> None:
    """`orksync rotate` reads no repository: the ServiceAccount comes from the inventory
    that recorded it, found by the Secret's owner annotation."""
    a = cluster.namespace("ta")
    allow(kube, a, [{**CONFIGMAPS_ONLY[0], "resources": ["secrets"]}])
    box = {"onReconcile": {"secrets": [{"name": "{{ .metadata.name }}-token",
                                        "rotateAfter": "1h",
                                        "data": {"token": "{{ randomHex 16 }}"}}]}}
    catalog = load_repository(write_repo(tmp_path, {
        "katalog.yaml": katalog(box, serviceAccountName=TENANT), "crd.yaml": CRD,
        "a.yaml": widget("a", a)}))
    rendered = render_catalog(catalog)
    synced = sync_once(kube, SyncRequest(rendered, inventory_name=inventory_name(),
                                         hooks=hook_renderers(catalog)))
    token = ref("v1", "Secret", "a-token", a)
    assert action(synced, token) is Action.CREATED

    identities = Identities(kube, recorded=recorded_accounts(kube))
    later = datetime.now(UTC) + timedelta(hours=2)
    rotated = rotate_due(kube, now=later, random=CryptoRandom(), namespace=a,
                         writer=identities.kube_for_owner)
    assert [(c.ref, c.action) for c in rotated.changes] == [(token, Action.CONFIGURED)]
    writes = [e for e in audit_events(control_plane.audit_log, resource="secrets",
                                      name="a-token", namespace=a)
              if e["verb"] in ("create", "patch")]
    assert [as_whom(e) for e in writes] == [user(a), user(a)]


def test_the_autoscaler_scales_as_the_service_account(
        kube: Kube, control_plane: ControlPlane, cluster: Cluster, tmp_path: Path) -> None:
    a = cluster.namespace("ta")
    allow(kube, a, [{**CONFIGMAPS_ONLY[0], "apiGroups": ["apps"],
                     "resources": ["deployments"]}])
    box = {"onReconcile": {"deployments": [{
        "name": "{{ .metadata.name }}", "image": "nginx", "replicas": "2",
        "autoscale": {"min": 1, "max": 4, "scaleUp": {
            "conditions": {"when": [{"field": "spec.load", "equals": "high"}]},
            "increment": 2}}}]}}
    inv = inventory_name()

    def sync(load: str) -> Any:
        catalog = load_repository(write_repo(tmp_path / load, {
            "katalog.yaml": katalog(box, serviceAccountName=TENANT), "crd.yaml": CRD,
            "a.yaml": widget("a", a, load=load)}))
        return sync_once(kube, SyncRequest(render_live(kube, catalog), inventory_name=inv,
                                           hooks=hook_renderers(catalog)))

    sync("low")
    scaled = sync("high")
    deployment = ref("apps/v1", "Deployment", "a", a)
    assert [c.message for c in changes_of(scaled, deployment)] == [
        "autoscale: replicas 2 -> 4 (scale up)"], scaled.changes
    writes = [e for e in audit_events(control_plane.audit_log, resource="deployments",
                                      name="a", namespace=a)
              if e["verb"] in ("create", "patch")]
    assert any("fieldManager=orksync-autoscale" in e["requestURI"] for e in writes), writes
    assert {as_whom(e) for e in writes} == {user(a)}


def test_diff_reads_and_dry_runs_as_the_service_account(
        kube: Kube, tenants: tuple[str, str], tmp_path: Path) -> None:
    """An object the tenant may not read is never shown: its ClusterRoleBinding exists
    (made by the admin, carrying orksync's markers, binding a subject the render does not
    name), and the diff reports the refusal instead of the object, which the agent's own
    diff shows."""
    a, b = tenants
    secret_marker = "only-the-admin-sees-this"
    kube.apply(kube.resource(RBAC, "ClusterRoleBinding"), {
        "apiVersion": RBAC, "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{a}-admin", "labels": {
            "app.kubernetes.io/managed-by": "orksync", "orkestra-owner": "a"},
            "annotations": {"note": secret_marker}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": secret_marker, "namespace": a}]},
        field_manager="orksync-tests", force=True)
    catalog = load_repository(tenant_repo(tmp_path, a, b))
    impersonation = Impersonation.of_catalog(catalog)
    rendered = render_live(kube, catalog, read_as=impersonation)
    assert rendered.ok, rendered.errors  # a child it may not list is one it does not see
    result = diff_objects(kube, mark_for_cleanup(rendered, "orksync-system/x"),
                          impersonation=impersonation)
    text = "".join(diff for _, diff in result.diffs) + "\n".join(result.errors)
    assert secret_marker not in text
    (error,) = [e for e in result.errors if "ClusterRoleBinding" in e]
    assert f'User "{user(a)}" cannot get resource "clusterrolebindings"' in error, error
    assert {str(r) for r, _ in result.diffs} >= {f"ConfigMap/{a}/a-cm", f"ConfigMap/{b}/b-cm"}

    # read as the agent (no ServiceAccount anywhere), the same diff shows the object
    plain = load_repository(write_repo(tmp_path / "plain", {
        **{p.name: p.read_text() for p in tmp_path.glob("*.yaml")},
        "katalog.yaml": re.sub(r"\n *serviceAccountName: .*", "",
                               (tmp_path / "katalog.yaml").read_text())}))
    shown = diff_objects(kube, mark_for_cleanup(render_live(kube, plain), "orksync-system/x"))
    assert secret_marker in "".join(diff for _, diff in shown.diffs), (
        [str(r) for r, _ in shown.diffs], shown.errors)


# --- the overlay ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def audited_plane(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[ControlPlane]:
    """A control plane of its own, started empty (as tests/cli/test_deploy.py's: the example's
    CRD and namespaces must be created by this sync), with an audit log."""
    audit = tmp_path_factory.mktemp("overlay") / "audit.log"
    with ControlPlane(bin_dir=control_plane.bin_dir, audit_log=audit) as cp:
        yield cp


def test_the_overlay_grants_no_writes_of_children_no_escalation_and_no_wildcard(
        control_plane: ControlPlane) -> None:
    docs = load_text(kubectl(control_plane, "kustomize", str(OVERLAY)).stdout)
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    grants = granted(role["rules"])
    writes = {"create", "update", "patch", "delete", "escalate", "bind", "impersonate"}
    for rule in role["rules"]:
        assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
    allowed_writes = {key for key, verbs in grants.items() if verbs & writes}
    assert allowed_writes == {
        ("apiextensions.k8s.io", "customresourcedefinitions"), ("", "namespaces"),
        ("", "serviceaccounts"), ("", "events"), ("events.k8s.io", "events"),
        ("platform.example.com", "webapps"), ("platform.example.com", "webapps/status"),
        ("platform.example.com", "webapps/finalizers"),
        # the example's plain manifests (platform/), the platform's, written as the agent
        ("rbac.authorization.k8s.io", "clusterroles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        # the web view's reviews, which store nothing
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
        # the Sync objects the agent serves: their finalizer and status
        ("orksync.io", "syncs"), ("orksync.io", "syncs/status"),
        ("orksync.io", "syncs/finalizers")}
    assert grants[("", "serviceaccounts")] == {"get", "list", "watch", "impersonate"}
    assert grants[("", "namespaces")] == {"get", "list", "watch", "create", "patch",
                                          "update", "delete"}
    assert not any({"escalate", "bind"} & verbs for verbs in grants.values())
    (impersonate,) = [r for r in role["rules"] if "impersonate" in r["verbs"]]
    assert impersonate["resourceNames"] == ["orksync-tenant"]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (cronjob,) = [d for d in docs if d["kind"] == "CronJob"]
    for pod in (deployment["spec"]["template"],
                cronjob["spec"]["jobTemplate"]["spec"]["template"]):
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["ORKSYNC_DEFAULT_SERVICE_ACCOUNT"] == "orksync-tenant"


def test_the_overlay_s_rbac_suffices_for_the_example_under_default_service_account(
        audited_plane: ControlPlane, tmp_path: Path) -> None:
    cp = audited_plane
    (namespace,) = load(DEPLOY / "base" / "namespace.yaml")
    kubectl(cp, "apply", "--server-side", "--field-manager=orksync-tests", "-f", "-",
            stdin=dump([namespace]))
    rbac = [d for d in load_text(kubectl(cp, "kustomize", str(OVERLAY)).stdout)
            if d["kind"] in RBAC_KINDS]
    kubectl(cp, "apply", "--server-side", "--field-manager=orksync-tests", "-f", "-",
            stdin=dump(rbac))
    config = service_account_kubeconfig(cp, tmp_path / "orksync.kubeconfig")

    def can(*args: str) -> bool:
        return kubectl(cp, "auth", "can-i", *args, kubeconfig=config,
                       check=False).stdout.strip() == "yes"

    assert not can("create", "deployments.apps", "-n", "team-a")
    assert not can("escalate", "clusterroles.rbac.authorization.k8s.io")
    assert not can("impersonate", "serviceaccounts/other", "-n", "team-a")

    def orksync(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**_env_without_kubeconfig(), "ORKSYNC_DEFAULT_SERVICE_ACCOUNT": "orksync-tenant"}
        return subprocess.run([sys.executable, "-m", "orksync", *args, str(REPO_EXAMPLE),
                               "--kubeconfig", str(config)], cwd=ROOT, capture_output=True,
                              text=True, timeout=300, check=False, env=env)

    # without the tenants' RBAC every child is refused, as the tenant
    refused = orksync("sync", "--once")
    assert refused.returncode == 1, refused.stderr
    assert 'User \\"system:serviceaccount:team-a:orksync-tenant\\" cannot' in refused.stderr \
        or 'User "system:serviceaccount:team-a:orksync-tenant" cannot' in refused.stderr, \
        refused.stderr
    assert kubectl(cp, "-n", "team-a", "get", "deployment", "shop",
                   check=False).returncode != 0

    template = (OVERLAY / "tenant-example.yaml").read_text()
    for ns in ("team-a", "team-b"):
        kubectl(cp, "apply", "--server-side", "--field-manager=orksync-tests", "-f", "-",
                stdin=template.replace("namespace: team-a", f"namespace: {ns}"))
    synced = orksync("sync", "--once")
    assert synced.returncode == 0, synced.stderr
    assert "failed=0" in synced.stderr, synced.stderr
    kubectl(cp, "-n", "team-a", "get", "webapp/shop", "deployment/shop", "service/shop-public")
    kubectl(cp, "-n", "team-b", "get", "webapp/blog", "deployment/blog", "service/blog")
    (created,) = [e for e in audit_events(cp.audit_log, resource="deployments", name="shop")
                  if e["responseStatus"]["code"] == 201]
    assert as_whom(created) == "system:serviceaccount:team-a:orksync-tenant"
    assert created["user"]["username"] == f"system:serviceaccount:{NAMESPACE}:orksync"

    diff = orksync("diff")  # reads and dry-runs as the tenants too: nothing left to change
    assert diff.returncode == 0, diff.stdout + diff.stderr

    # the rotate CronJob's command, with the overlay's RBAC: the Secret of a WebApp (the
    # example makes none; a tenant whose Katalog does is granted Secrets) is rewritten as
    # the tenant the inventory recorded
    kubectl(cp, "-n", "team-a", "create", "role", "secrets", "--verb=get,patch,update",
            "--resource=secrets")
    kubectl(cp, "-n", "team-a", "create", "rolebinding", "secrets", "--role=secrets",
            "--serviceaccount=team-a:orksync-tenant")
    token = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "shop-token", "namespace": "team-a",
        "labels": {"app.kubernetes.io/managed-by": "orksync", "orkestra-owner": "shop"},
        "annotations": {"orksync.io/generators": '{"token":"<generate:randomHex:16>"}',
                        "orksync.io/owner": "WebApp.platform.example.com/team-a/shop"}},
        "stringData": {"token": os.urandom(16).hex()}}
    kubectl(cp, "apply", "--server-side", "--field-manager=orksync", "-f", "-",
            stdin=dump([token]))
    rotated = subprocess.run(
        [sys.executable, "-m", "orksync", "rotate", "--force", "team-a/shop-token",
         "--kubeconfig", str(config)], cwd=ROOT, capture_output=True, text=True, timeout=300,
        check=False, env=_env_without_kubeconfig())  # no default: the inventory says who
    assert rotated.returncode == 0, rotated.stderr
    assert "configured Secret/team-a/shop-token" in rotated.stderr, rotated.stderr
    (patched,) = [e for e in audit_events(cp.audit_log, resource="secrets", name="shop-token")
                  if e["user"]["username"].endswith(":orksync")]
    assert as_whom(patched) == "system:serviceaccount:team-a:orksync-tenant"


def test_an_unreadable_inventory_stops_no_rotation_and_is_named(
        kube: Kube, caplog: pytest.LogCaptureFixture) -> None:
    """`orksync rotate` reads every inventory for the recorded ServiceAccounts: a corrupt
    one (here: data that is not an inventory) is left out with a warning naming it, and
    the readable ones still count."""
    import uuid

    from orksync.sync import recorded_accounts

    maps = kube.resource("v1", "ConfigMap")
    name = f"orksync-inventory-broken-{uuid.uuid4().hex[:6]}"
    kube.create(maps, {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": "orksync-system",
                                    "labels": {"app.kubernetes.io/component": "inventory"}},
                       "binaryData": {"entries": "bm90IGFuIGludmVudG9yeQ=="},
                       "data": {"format": "v1"}},
                field_manager="orksync-tests")
    try:
        with caplog.at_level("WARNING", logger="orksync"):
            recorded_accounts(kube)  # raised InventoryError before
        assert any(name in r.getMessage() for r in caplog.records), caplog.text
    finally:
        kube.delete(maps, "orksync-system", name)

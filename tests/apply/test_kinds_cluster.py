"""Every template key, synced into the real control plane: created with its key fields,
unchanged on the next sync; drift, the namespace guard, copies, and the reference examples
(semantics §2.1-2.4; the matrix is docs/semantics-matrix.md). The per-key cases live in
tests/kind_cases.py."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.model import Action
from orksync.render.kinds import KINDS
from tests.helpers import CRD, widget, write_repo
from tests.kind_cases import (
    CASES,
    OWNER_ANNOTATION,
    WIDGET_API,
    Cluster,
    action,
    assert_not_written,
    case_ref,
    changes_of,
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


def test_the_cases_cover_every_template_key() -> None:
    assert set(CASES) == {k.key for k in KINDS}


@pytest.mark.parametrize("key", list(CASES))
def test_an_on_reconcile_entry_of_every_key_is_created_then_left_unchanged(
        kube: Kube, cluster: Cluster, tmp_path: Path, key: str) -> None:
    entry, _, check = CASES[key]
    ns = cluster.namespace()
    prepare(kube, cluster, ns, [key])
    obj = case_ref(key, ns)
    root = write_repo(tmp_path, {"katalog.yaml": katalog({"onReconcile": {key: [entry]}}),
                                 "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    inv = inventory_name()

    first = sync(kube, root, inv)
    assert not first.changes.failed, first.changes.failed
    assert action(first, obj) is Action.CREATED
    live = must(kube, obj)
    check(live, ns)
    assert live["metadata"]["labels"]["orkestra.orkspace.io/managed"] == "true"

    before = must(kube, obj)
    second = sync(kube, root, inv)
    assert not second.changes.failed, second.changes.failed
    assert action(second, obj) is Action.UNCHANGED
    assert_not_written(before, must(kube, obj))


# --- drift ----------------------------------------------------------------------------------


def _drift_repo(tmp_path: Path, ns: str, reconcile: bool) -> Path:
    entry: dict[str, Any] = {"name": "{{ .metadata.name }}", "image": "nginx",
                             "replicas": "2"}
    if reconcile:
        entry["reconcile"] = True
    return write_repo(tmp_path, {"katalog.yaml": katalog({"onCreate": {"deployments": [entry]}}),
                                 "crd.yaml": CRD, "w.yaml": widget("w", ns)})


def test_an_on_create_deployment_with_reconcile_has_its_drift_corrected(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.namespace()
    root, inv = _drift_repo(tmp_path, ns, reconcile=True), inventory_name()
    deploy = ref("apps/v1", "Deployment", "w", ns)
    assert action(sync(kube, root, inv), deploy) is Action.CREATED
    patch(kube, deploy, {"spec": {"replicas": 5}})
    assert must(kube, deploy)["spec"]["replicas"] == 5
    again = sync(kube, root, inv)
    assert action(again, deploy) is Action.CONFIGURED
    assert must(kube, deploy)["spec"]["replicas"] == 2


def test_an_on_create_deployment_without_reconcile_keeps_a_hand_edit(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.namespace()
    root, inv = _drift_repo(tmp_path, ns, reconcile=False), inventory_name()
    deploy = ref("apps/v1", "Deployment", "w", ns)
    assert action(sync(kube, root, inv), deploy) is Action.CREATED
    patch(kube, deploy, {"spec": {"replicas": 5}})
    again = sync(kube, root, inv)
    assert action(again, deploy) is Action.UNCHANGED
    assert must(kube, deploy)["spec"]["replicas"] == 5


# --- create-only kinds and cleanup on a false condition (semantics §2.3) ------------------------


def _changed_spec_repo(tmp_path: Path, ns: str, key: str, entry: dict[str, Any],
                       value: str) -> Path:
    return write_repo(tmp_path, {"katalog.yaml": katalog({"onReconcile": {key: [entry]}}),
                                 "crd.yaml": CRD, "w.yaml": widget("w", ns, value=value)})


def test_a_job_under_on_reconcile_is_created_once_and_never_updated(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns, inv = cluster.namespace(), inventory_name()
    entry = {"image": "busybox", "command": ["echo", "{{ .spec.value }}"]}
    job = ref("batch/v1", "Job", "w-job", ns)
    assert action(sync(kube, _changed_spec_repo(tmp_path, ns, "jobs", entry, "one"), inv),
                  job) is Action.CREATED
    again = sync(kube, _changed_spec_repo(tmp_path, ns, "jobs", entry, "two"), inv)
    assert action(again, job) is Action.UNCHANGED
    assert must(kube, job)["spec"]["template"]["spec"]["containers"][0]["command"] == \
        ["echo", "one"]


def test_a_service_account_under_on_reconcile_is_applied_so_a_label_change_lands(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns, inv = cluster.namespace(), inventory_name()
    entry = {"labels": {"value": "{{ .spec.value }}"}}
    sa = ref("v1", "ServiceAccount", "w-sa", ns)
    assert action(sync(kube, _changed_spec_repo(tmp_path, ns, "serviceAccounts", entry, "one"),
                       inv), sa) is Action.CREATED
    again = sync(kube, _changed_spec_repo(tmp_path, ns, "serviceAccounts", entry, "two"), inv)
    # orksync difference W6: Orkestra never updates ServiceAccounts; orksync applies them
    assert action(again, sa) is Action.CONFIGURED
    assert must(kube, sa)["metadata"]["labels"]["value"] == "two"


def test_a_namespace_under_on_reconcile_is_applied_so_a_label_change_lands(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns, inv = cluster.namespace(), inventory_name()
    entry = {"name": "{{ .metadata.namespace }}-ns", "labels": {"value": "{{ .spec.value }}"}}
    child = ref("v1", "Namespace", f"{ns}-ns")
    cluster.cluster_scoped.append(child)
    assert action(sync(kube, _changed_spec_repo(tmp_path, ns, "namespaces", entry, "one"),
                       inv), child) is Action.CREATED
    again = sync(kube, _changed_spec_repo(tmp_path, ns, "namespaces", entry, "two"), inv)
    # orksync difference W6: Orkestra never updates Namespaces; orksync applies them
    assert action(again, child) is Action.CONFIGURED
    assert must(kube, child)["metadata"]["labels"]["value"] == "two"


def _conditional_repo(tmp_path: Path, ns: str, key: str, entry: dict[str, Any],
                      flag: str) -> Path:
    """`entry` under a condition, beside an unconditional ConfigMap (a custom resource that
    suddenly renders no children at all makes the prune refuse, by design)."""
    entry = {**entry, "when": [{"field": "spec.flag", "equals": "on"}]}
    box = {key: [entry], "configMaps": [{"name": "always", "data": {"a": "1"}}]}
    return write_repo(tmp_path, {"katalog.yaml": katalog({"onReconcile": box}),
                                 "crd.yaml": CRD, "w.yaml": widget("w", ns, flag=flag)})


def test_a_job_whose_condition_turns_false_is_not_cleaned_up(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns, inv = cluster.namespace(), inventory_name()
    entry = {"image": "busybox", "command": ["true"]}
    job = ref("batch/v1", "Job", "w-job", ns)
    assert action(sync(kube, _conditional_repo(tmp_path, ns, "jobs", entry, "on"), inv),
                  job) is Action.CREATED
    again = sync(kube, _conditional_repo(tmp_path, ns, "jobs", entry, "off"), inv)
    assert not [c for c in again.changes.changes if c.ref == job and
                c.action is Action.DELETED]
    live = get(kube, job)
    assert live is not None and not live["metadata"].get("deletionTimestamp")


def test_a_cluster_role_whose_condition_turns_false_is_deleted_by_its_owner_label(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns, inv = cluster.namespace(), inventory_name()
    entry = {"name": "{{ .metadata.namespace }}-flagged",
             "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    role = ref("rbac.authorization.k8s.io/v1", "ClusterRole", f"{ns}-flagged")
    cluster.cluster_scoped.append(role)
    assert action(sync(kube, _conditional_repo(tmp_path, ns, "clusterRoles", entry, "on"), inv),
                  role) is Action.CREATED
    again = sync(kube, _conditional_repo(tmp_path, ns, "clusterRoles", entry, "off"), inv)
    assert action(again, role) is Action.DELETED
    assert get(kube, role) is None


# --- the namespace guard ------------------------------------------------------------------------


def test_a_custom_resource_outside_the_allowed_namespaces_is_skipped_with_a_reason(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns = f"other-{uuid.uuid4().hex[:8]}"
    cluster.namespaces.append(ns)
    box = {"onReconcile": {"configMaps": [{"data": {"a": "1"}}]}}
    root = write_repo(tmp_path, {"katalog.yaml": katalog(box, allowedNamespaces=["team-*"]),
                                 "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    result = sync(kube, root, inventory_name())
    cr = ref(WIDGET_API, "Widget", "w", ns)
    (change,) = changes_of(result, cr)
    assert change.action is Action.SKIPPED
    assert "allowedNamespaces" in change.message and ns in change.message
    assert get(kube, cr) is None
    assert get(kube, ref("v1", "ConfigMap", "w-config", ns)) is None
    assert not [c for c in result.changes.changes if c.ref.namespace == ns
                and c.action is not Action.SKIPPED]


def test_a_child_rendered_into_a_refused_namespace_is_skipped(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    ns, refused = f"team-{suffix}", f"other-{suffix}"
    cluster.create_namespace(ns)
    cluster.create_namespace(refused)
    box = {"onReconcile": {"configMaps": [
        {"name": "inside", "data": {"a": "1"}},
        {"name": "outside", "namespace": "{{ .spec.elsewhere }}", "data": {"a": "1"}}]}}
    root = write_repo(tmp_path, {"katalog.yaml": katalog(box, allowedNamespaces=["team-*"]),
                                 "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, elsewhere=refused)})
    result = sync(kube, root, inventory_name())
    assert not result.changes.failed, result.changes.failed
    inside, outside = ref("v1", "ConfigMap", "inside", ns), ref("v1", "ConfigMap", "outside",
                                                                 refused)
    assert action(result, inside) is Action.CREATED
    (change,) = changes_of(result, outside)
    assert change.action is Action.SKIPPED and refused in change.message
    assert get(kube, outside) is None


# --- copies ------------------------------------------------------------------------------------


def test_a_config_map_copied_from_another_namespace_keeps_its_declared_keys_over_the_source(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns, source_ns = cluster.namespace(), cluster.namespace("src")
    kube.create(kube.resource("v1", "ConfigMap"), {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "base", "namespace": source_ns},
        "data": {"color": "red", "size": "L"}}, field_manager="orksync-tests")
    box = {"onReconcile": {"configMaps": [{"name": "merged", "fromConfigMap": "base",
                                           "fromNamespace": source_ns,
                                           "data": {"color": "blue"}}]}}
    root = write_repo(tmp_path, {"katalog.yaml": katalog(box), "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns)})
    inv = inventory_name()
    merged = ref("v1", "ConfigMap", "merged", ns)
    assert action(sync(kube, root, inv), merged) is Action.CREATED
    assert must(kube, merged)["data"] == {"color": "blue", "size": "L"}
    assert action(sync(kube, root, inv), merged) is Action.UNCHANGED


def test_to_namespaces_copies_a_config_map_into_each_target_owned_by_annotation_not_reference(
        kube: Kube, cluster: Cluster, tmp_path: Path) -> None:
    ns, a, b = cluster.namespace(), cluster.namespace("ta"), cluster.namespace("tb")
    box = {"onReconcile": {"configMaps": [{"name": "shared", "data": {"k": "v"},
                                           "toNamespaces": ["{{ .spec.targets }}"]}]}}
    root = write_repo(tmp_path, {"katalog.yaml": katalog(box), "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns, targets=f"[{a}, {b}]")})
    inv = inventory_name()
    result = sync(kube, root, inv)
    assert not result.changes.failed, result.changes.failed
    for target in (a, b):
        copy = ref("v1", "ConfigMap", "shared", target)
        assert action(result, copy) is Action.CREATED
        live = must(kube, copy)
        assert live["data"] == {"k": "v"}
        assert "ownerReferences" not in live["metadata"]
        assert live["metadata"]["annotations"][OWNER_ANNOTATION] == f"Widget.test.orksync.io/{ns}/w"
        assert live["metadata"]["labels"]["orkestra-owner"] == "w"
    assert get(kube, ref("v1", "ConfigMap", "shared", ns)) is None
    again = sync(kube, root, inv)
    assert {action(again, ref("v1", "ConfigMap", "shared", t)) for t in (a, b)} == \
        {Action.UNCHANGED}


SOURCES: dict[str, tuple[str, str, dict[str, Any], str]] = {
    # key: (source field, kind, source body's payload, live field compared)
    "networkPolicies": ("fromNetworkPolicy", "NetworkPolicy",
                        {"spec": {"podSelector": {"matchLabels": {"app": "db"}},
                                  "policyTypes": ["Ingress"],
                                  "ingress": [{"ports": [{"protocol": "TCP",
                                                          "port": 5432}]}]}}, "spec"),
    "resourceQuotas": ("fromResourceQuota", "ResourceQuota",
                       {"spec": {"hard": {"pods": "7", "requests.memory": "1Gi"}}}, "spec"),
    "limitRanges": ("fromLimitRange", "LimitRange",
                    {"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"},
                                          "default": {"cpu": "1"},
                                          "defaultRequest": {"cpu": "1"}}]}}, "spec"),
}
API = {"NetworkPolicy": "networking.k8s.io/v1", "ResourceQuota": "v1", "LimitRange": "v1"}


@pytest.mark.parametrize("key", list(SOURCES))
def test_a_network_policy_quota_or_limit_range_copied_from_a_source_takes_its_spec(
        kube: Kube, cluster: Cluster, tmp_path: Path, key: str) -> None:
    field, kind, payload, compared = SOURCES[key]
    ns, source_ns = cluster.namespace(), cluster.namespace("src")
    source = {"apiVersion": API[kind], "kind": kind,
              "metadata": {"name": "base", "namespace": source_ns}, **payload}
    kube.create(kube.resource(API[kind], kind), source, field_manager="orksync-tests")
    source_live = must(kube, ref(API[kind], kind, "base", source_ns))
    box = {"onReconcile": {key: [{"name": "copy", field: "base",
                                  "fromNamespace": source_ns}]}}
    root = write_repo(tmp_path, {"katalog.yaml": katalog(box), "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns)})
    inv = inventory_name()
    copy = ref(API[kind], kind, "copy", ns)
    result = sync(kube, root, inv)
    assert not result.changes.failed, result.changes.failed
    assert action(result, copy) is Action.CREATED
    live = must(kube, copy)
    if kind == "ResourceQuota":
        assert live["spec"]["hard"] == source_live["spec"]["hard"]
    else:
        assert live[compared] == source_live[compared]
    assert action(sync(kube, root, inv), copy) is Action.UNCHANGED


@pytest.mark.parametrize("key", ["configMaps", *SOURCES])
def test_a_copy_whose_source_is_missing_fails_naming_the_source(
        kube: Kube, cluster: Cluster, tmp_path: Path, key: str) -> None:
    field = {"configMaps": "fromConfigMap", **{k: v[0] for k, v in SOURCES.items()}}[key]
    kind = {"configMaps": "ConfigMap", **{k: v[1] for k, v in SOURCES.items()}}[key]
    ns, source_ns = cluster.namespace(), cluster.namespace("src")
    box = {"onReconcile": {key: [{"name": "copy", field: "nowhere",
                                  "fromNamespace": source_ns}]}}
    root = write_repo(tmp_path, {"katalog.yaml": katalog(box), "crd.yaml": CRD,
                                 "w.yaml": widget("w", ns)})
    result = sync(kube, root, inventory_name())
    copy = ref(API.get(kind, "v1"), kind, "copy", ns)
    (change,) = changes_of(result, copy)
    assert change.action is Action.FAILED
    assert f"{kind}/{source_ns}/nowhere" in change.message
    assert get(kube, copy) is None


# --- the reference examples ---------------------------------------------------------------------


@pytest.mark.parametrize("example", ["hello-website", "when-conditions", "once-secret",
                                     "secret-copy"])
def test_a_reference_example_syncs_without_failure_and_then_changes_nothing(
        kube: Kube, orkestra_examples: Path, example: str) -> None:
    if example == "secret-copy":
        for name in ("platform", "team-alpha", "team-beta"):
            Cluster(kube).create_namespace(name)
        secrets = kube.resource("v1", "Secret")
        if kube.get_or_none(secrets, "platform", "database-credentials") is None:
            try:
                kube.create(secrets, {"apiVersion": "v1", "kind": "Secret",
                                      "metadata": {"name": "database-credentials",
                                                   "namespace": "platform"},
                                      "stringData": {"username": "app", "password": "s3cret"}},
                            field_manager="orksync-tests")
            except ClusterError as err:
                if err.status != 409:
                    raise
    root, inv = orkestra_examples / example, f"example-{uuid.uuid4().hex[:8]}"
    first = sync(kube, root, inv)
    assert not first.changes.failed, first.changes.failed
    second = sync(kube, root, inv)
    assert not second.changes.failed, second.changes.failed
    moved = {str(c.ref): (c.action.value, c.message) for c in second.changes.changes
             if c.action is not Action.UNCHANGED}
    assert moved == {}

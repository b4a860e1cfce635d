"""Every template key, synced into the real control plane: created with its key fields,
unchanged on the next sync; drift, the namespace guard, copies, and the reference examples
(semantics §2.1-2.4; the matrix is docs/semantics-matrix.md)."""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orksync.apply.deletion import remove_finalizer
from orksync.apply.kube import Kube
from orksync.apply.sync import SyncResult, hook_renderers, sync_once
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.model import Action, Change, ObjRef
from orksync.render.engine import render_catalog
from orksync.render.kinds import KINDS
from orksync.testing.controlplane import ControlPlane
from tests.helpers import CRD, widget, write_repo

pytestmark = pytest.mark.cluster

WIDGET_API = "test.orksync.io/v1"
MERGE = "application/merge-patch+json"
OWNER_ANNOTATION = "orksync.io/owner"
# Kinds a controller of kube-controller-manager writes to (status, finalizers): their
# resourceVersion moves without orksync, so "not written" is judged by generation and by
# orksync's managedFields entry instead.
CONTROLLED = {"Deployment", "ReplicaSet", "StatefulSet", "Job", "CronJob", "PersistentVolume",
              "PersistentVolumeClaim", "HorizontalPodAutoscaler", "PodDisruptionBudget",
              "Pod", "Namespace"}


# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


class Cluster:
    """Namespaces and cluster-scoped objects a test makes, removed afterwards (our finalizer
    stripped from the Widgets first so that the namespace can go)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.namespaces: list[str] = []
        self.cluster_scoped: list[ObjRef] = []

    def namespace(self, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.create_namespace(name)
        return name

    def create_namespace(self, name: str) -> None:
        res = self.kube.resource("v1", "Namespace")
        if self.kube.get_or_none(res, "", name) is None:
            try:
                self.kube.create(res, {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": name}},
                                 field_manager="orksync-tests")
            except ClusterError as err:
                if err.status != 409:
                    raise
        self.namespaces.append(name)

    def cleanup(self) -> None:
        for ref in self.cluster_scoped:
            with contextlib.suppress(ClusterError):
                self.kube.delete(self.kube.resource(ref.api_version, ref.kind), "", ref.name)
        for name in self.namespaces:
            try:
                res = self.kube.resource(WIDGET_API, "Widget")
                for item in self.kube.list(res, namespace=name):
                    remove_finalizer(self.kube, res, item)
                self.kube.delete(self.kube.resource("v1", "Namespace"), "", name)
            except ClusterError:
                pass


@pytest.fixture
def cluster(kube: Kube) -> Iterator[Cluster]:
    c = Cluster(kube)
    yield c
    c.cleanup()


def katalog(box: dict[str, Any], **entry: Any) -> str:
    """A Widget Katalog with operatorBox `box` (extra CRD-entry keys in `entry`)."""
    doc = {"apiVersion": "orkestra.orkspace.io/v1", "kind": "Katalog",
           "metadata": {"name": "widgets"},
           "spec": {"crds": {"widget": {"crdFile": "./crd.yaml", **entry,
                                        "operatorBox": box}}}}
    return yaml.safe_dump(doc, sort_keys=False)


def sync(kube: Kube, root: Path, inventory: str) -> SyncResult:
    catalog = load_repository(root)
    rendered = render_catalog(catalog)
    assert rendered.ok, rendered.errors
    return sync_once(kube, rendered, inventory_name=inventory, hooks=hook_renderers(catalog))


def inventory_name() -> str:
    return f"kinds-{uuid.uuid4().hex[:8]}"


def get(kube: Kube, r: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(r.api_version, r.kind), r.namespace, r.name)


def must(kube: Kube, r: ObjRef) -> dict[str, Any]:
    live = get(kube, r)
    assert live is not None, f"{r} is missing"
    return live


def patch(kube: Kube, r: ObjRef, body: Any) -> None:
    res = kube.resource(r.api_version, r.kind)
    kube.request("PATCH", res.path(r.namespace, r.name), body=body, content_type=MERGE)


def ref(api_version: str, kind: str, name: str, ns: str = "") -> ObjRef:
    return ObjRef(api_version=api_version, kind=kind, namespace=ns, name=name)


def changes_of(result: SyncResult, r: ObjRef) -> list[Change]:
    return [c for c in result.changes.changes if c.ref == r]


def action(result: SyncResult, r: ObjRef) -> Action:
    found = changes_of(result, r)
    assert found, f"no change for {r} in {[str(c.ref) for c in result.changes.changes]}"
    return found[-1].action


def written_by_orksync(live: dict[str, Any]) -> list[Any]:
    meta = live["metadata"]
    return [(m.get("operation"), m.get("time"), m.get("fieldsV1"))
            for m in meta.get("managedFields") or [] if m.get("manager") == "orksync"]


def create_service_account(kube: Kube, ns: str, name: str) -> None:
    """The ServiceAccount admission plugin wants a pod's account to exist (and no token
    controller makes `default` here): create the one the pod names."""
    kube.create(kube.resource("v1", "ServiceAccount"),
                {"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": name, "namespace": ns}}, field_manager="orksync-tests")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# --- one case per template key -----------------------------------------------------------------

# key -> (entry, (apiVersion, kind, name template), check(live, ns, cr uid))
# Name templates: {ns} is the test's namespace (cluster-scoped names are made unique by it).
Check = Callable[[dict[str, Any], str], None]


def _ns(live: dict[str, Any], ns: str) -> None:
    assert live["metadata"]["labels"]["tier"] == "platform"
    assert live["metadata"]["labels"]["orkestra-owner"] == "w"
    # A namespaced owner cannot own a cluster-scoped child: label + annotation only (§2.2).
    assert "ownerReferences" not in live["metadata"]
    assert live["metadata"]["annotations"][OWNER_ANNOTATION].endswith(f"{ns}/w")


def _secret(live: dict[str, Any], ns: str) -> None:
    assert live["type"] == "Opaque"
    assert live["data"]["username"] == b64("admin")
    assert live["metadata"]["labels"]["orkestra-owner"] == "w"


def _config(live: dict[str, Any], ns: str) -> None:
    assert live["data"] == {"color": "blue", "owner": "w"}
    assert live["metadata"]["ownerReferences"][0]["kind"] == "Widget"


def _netpol(live: dict[str, Any], ns: str) -> None:
    assert live["spec"]["podSelector"] == {"matchLabels": {"app": "shop"}}
    assert live["spec"]["policyTypes"] == ["Ingress"]
    assert live["spec"]["ingress"][0]["ports"][0] == {"protocol": "TCP", "port": 8080}


def _quota(live: dict[str, Any], ns: str) -> None:
    assert live["spec"]["hard"] == {"pods": "10", "requests.cpu": "1500m"}


def _limits(live: dict[str, Any], ns: str) -> None:
    (limit,) = live["spec"]["limits"]
    assert limit["type"] == "Container"
    assert limit["max"] == {"cpu": "2", "memory": "2Gi"}


def _cluster_role(live: dict[str, Any], ns: str) -> None:
    assert live["rules"][0]["resources"] == ["pods"] and live["rules"][0]["verbs"] == ["get"]
    assert "ownerReferences" not in live["metadata"]
    assert live["metadata"]["labels"]["orkestra-owner"] == "w"


def _crb(live: dict[str, Any], ns: str) -> None:
    assert live["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "view"}
    assert live["subjects"][0]["kind"] == "ServiceAccount"
    assert live["subjects"][0]["namespace"] == ns


def _sa(live: dict[str, Any], ns: str) -> None:
    assert live["imagePullSecrets"] == [{"name": "regcred"}]
    assert live["automountServiceAccountToken"] is False


def _role(live: dict[str, Any], ns: str) -> None:
    assert live["rules"][0]["resourceNames"] == ["w-config"]
    assert live["rules"][0]["verbs"] == ["get", "list"]


def _rb(live: dict[str, Any], ns: str) -> None:
    assert live["roleRef"]["kind"] == "Role" and live["roleRef"]["name"] == "w-role"
    assert live["subjects"][0] == {"kind": "ServiceAccount", "name": "w-sa", "namespace": ns}


def _custom(live: dict[str, Any], ns: str) -> None:
    assert live["data"] == {"size": "3", "flag": "true"}
    assert live["metadata"]["labels"]["tier"] == "web"
    assert live["metadata"]["annotations"]["note"] == "custom"


def _rs(live: dict[str, Any], ns: str) -> None:
    assert live["spec"]["replicas"] == 2
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert live["spec"]["selector"]["matchLabels"]["orkestra-owner"] == "w"


def _deploy(live: dict[str, Any], ns: str) -> None:
    assert live["spec"]["replicas"] == 3
    container = live["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx:1.27"
    assert container["ports"][0]["containerPort"] == 8080


def _svc(live: dict[str, Any], ns: str) -> None:
    port = live["spec"]["ports"][0]
    assert (port["port"], port["targetPort"]) == (80, 8080)
    assert live["spec"]["selector"]["orkestra-owner"] == "w"


def _job(live: dict[str, Any], ns: str) -> None:
    assert live["spec"]["backoffLimit"] == 3
    pod = live["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"
    assert pod["containers"][0]["command"] == ["sh", "-c", "echo w"]


def _cron(live: dict[str, Any], ns: str) -> None:
    spec = live["spec"]
    assert spec["schedule"] == "*/5 * * * *"
    assert (spec["suspend"], spec["concurrencyPolicy"]) == (True, "Forbid")


def _sts(live: dict[str, Any], ns: str) -> None:
    assert live["spec"]["serviceName"] == "w"
    assert live["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert live["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"] == \
        {"storage": "1Gi"}


def _pv(live: dict[str, Any], ns: str) -> None:
    assert live["spec"]["capacity"] == {"storage": "5Gi"}
    assert live["spec"]["hostPath"]["path"] == "/mnt/data"
    assert live["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def _pvc(live: dict[str, Any], ns: str) -> None:
    assert live["spec"]["resources"]["requests"] == {"storage": "1Gi"}
    assert live["spec"]["accessModes"] == ["ReadWriteOnce"]


def _ingress(live: dict[str, Any], ns: str) -> None:
    (rule,) = live["spec"]["rules"]
    assert rule["host"] == "w.example.com"
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "w-svc", "port": {"number": 80}}
    assert rule["http"]["paths"][0]["pathType"] == "Prefix"


def _hpa(live: dict[str, Any], ns: str) -> None:
    spec = live["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                      "name": "w"}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 5)
    assert spec["metrics"][0]["resource"]["target"]["averageUtilization"] == 75


def _pdb(live: dict[str, Any], ns: str) -> None:
    assert live["spec"]["minAvailable"] == "50%"
    assert live["metadata"]["ownerReferences"][0]["name"] == "w"


def _pod(live: dict[str, Any], ns: str) -> None:
    container = live["spec"]["containers"][0]
    assert container["image"] == "nginx:1.27"
    assert container["ports"][0]["containerPort"] == 80
    assert live["spec"]["restartPolicy"] == "Always"
    assert live["spec"]["serviceAccountName"] == "runner"


CASES: dict[str, tuple[dict[str, Any], tuple[str, str, str], Check]] = {
    "namespaces": ({"name": "{{ .metadata.namespace }}-ns", "labels": {"tier": "platform"}},
                   ("v1", "Namespace", "{ns}-ns"), _ns),
    "secrets": ({"data": {"username": "admin"}}, ("v1", "Secret", "w-secret"), _secret),
    "configMaps": ({"data": {"color": "blue", "owner": "{{ .metadata.name }}"}},
                   ("v1", "ConfigMap", "w-config"), _config),
    "networkPolicies": ({"name": "w-netpol", "podSelector": {"app": "shop"},
                         "ingress": [{"from": [{"podSelector": {"role": "front"}}],
                                      "ports": [{"port": "8080"}]}]},
                        ("networking.k8s.io/v1", "NetworkPolicy", "w-netpol"), _netpol),
    "resourceQuotas": ({"name": "w-quota", "hard": {"pods": "10", "requests.cpu": "1.5"}},
                       ("v1", "ResourceQuota", "w-quota"), _quota),
    "limitRanges": ({"name": "w-limits", "limits": [
        {"type": "Container", "max": {"cpu": "2", "memory": "2Gi"},
         "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "100m"}}]},
        ("v1", "LimitRange", "w-limits"), _limits),
    "clusterRoles": ({"name": "{{ .metadata.namespace }}-reader",
                      "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
                     ("rbac.authorization.k8s.io/v1", "ClusterRole", "{ns}-reader"),
                     _cluster_role),
    "clusterRoleBindings": ({"name": "{{ .metadata.namespace }}-crb",
                             "roleRef": {"name": "view"}, "subjects": [{"name": "w-sa"}]},
                            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "{ns}-crb"),
                            _crb),
    "serviceAccounts": ({"imagePullSecrets": ["regcred"],
                         "automountServiceAccountToken": "false"},
                        ("v1", "ServiceAccount", "w-sa"), _sa),
    "roles": ({"rules": [{"apiGroups": [""], "resources": ["configmaps"],
                          "verbs": ["get", "list"],
                          "resourceNames": ["{{ .metadata.name }}-config"]}]},
              ("rbac.authorization.k8s.io/v1", "Role", "w-role"), _role),
    "roleBindings": ({"roleRef": {"name": "w-role"}, "subjects": [{"name": "w-sa"}]},
                     ("rbac.authorization.k8s.io/v1", "RoleBinding", "w-rolebinding"), _rb),
    "custom": ({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "w-custom", "labels": {"tier": "web"},
                             "annotations": {"note": "custom"}},
                "data": {"size": "3", "flag": "true"}},
               ("v1", "ConfigMap", "w-custom"), _custom),
    "replicaSets": ({"image": "nginx:1.27", "replicas": "2"},
                    ("apps/v1", "ReplicaSet", "w-replicaset"), _rs),
    "deployments": ({"image": "nginx:1.27", "replicas": "3", "port": "8080"},
                    ("apps/v1", "Deployment", "w-deployment"), _deploy),
    "services": ({"port": "80", "targetPort": "8080"}, ("v1", "Service", "w-svc"), _svc),
    "jobs": ({"image": "busybox", "command": ["sh", "-c", "echo {{ .metadata.name }}"]},
             ("batch/v1", "Job", "w-job"), _job),
    "cronJobs": ({"image": "busybox", "schedule": "*/5 * * * *", "suspend": "true",
                  "concurrencyPolicy": "forbid", "command": ["date"]},
                 ("batch/v1", "CronJob", "w-cronjob"), _cron),
    "statefulSets": ({"image": "postgres", "tag": "16", "port": "5432",
                      "volumeClaimTemplates": [{"storageSize": "1Gi"}]},
                     ("apps/v1", "StatefulSet", "w"), _sts),
    "persistentVolumes": ({"name": "{{ .metadata.namespace }}-pv", "capacity": "5Gi",
                           "hostPath": "/mnt/data"},
                          ("v1", "PersistentVolume", "{ns}-pv"), _pv),
    "persistentVolumeClaims": ({"name": "w-data", "storage": "1Gi"},
                               ("v1", "PersistentVolumeClaim", "w-data"), _pvc),
    "ingresses": ({"host": "w.example.com", "serviceName": "w-svc", "servicePort": "80"},
                  ("networking.k8s.io/v1", "Ingress", "w-ingress"), _ingress),
    "hpa": ({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment"},
             "minReplicas": "2", "maxReplicas": "5", "targetCPUUtilizationPercentage": "75"},
            ("autoscaling/v2", "HorizontalPodAutoscaler", "w-hpa"), _hpa),
    "pdb": ({"minAvailable": "50%"}, ("policy/v1", "PodDisruptionBudget", "w-pdb"), _pdb),
    "pods": ({"image": "nginx:1.27", "port": "80", "serviceAccountName": "runner"},
             ("v1", "Pod", "w-pod"), _pod),
}


def test_the_cases_cover_every_template_key() -> None:
    assert set(CASES) == {k.key for k in KINDS}


@pytest.mark.parametrize("key", list(CASES))
def test_an_on_reconcile_entry_of_every_key_is_created_then_left_unchanged(
        kube: Kube, cluster: Cluster, tmp_path: Path, key: str) -> None:
    entry, (api_version, kind, name), check = CASES[key]
    ns = cluster.namespace()
    if kind == "Pod":
        create_service_account(kube, ns, "runner")
    target = ref(api_version, kind, name.format(ns=ns),
                 "" if "{ns}" in name else ns)
    if not target.namespace:
        cluster.cluster_scoped.append(target)
    root = write_repo(tmp_path, {"katalog.yaml": katalog({"onReconcile": {key: [entry]}}),
                                 "crd.yaml": CRD, "w.yaml": widget("w", ns)})
    inv = inventory_name()

    first = sync(kube, root, inv)
    assert not first.changes.failed, first.changes.failed
    assert action(first, target) is Action.CREATED
    live = must(kube, target)
    check(live, ns)
    assert live["metadata"]["labels"]["orkestra.orkspace.io/managed"] == "true"

    before = must(kube, target)
    second = sync(kube, root, inv)
    assert not second.changes.failed, second.changes.failed
    assert action(second, target) is Action.UNCHANGED
    after = must(kube, target)
    if kind in CONTROLLED:
        assert after["metadata"].get("generation") == before["metadata"].get("generation")
        assert written_by_orksync(after) == written_by_orksync(before)
    else:
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


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

"""One entry per template key, its expected object and a check of the live object, plus the
helpers the cluster tests of Widget Katalogs share (tests/apply/test_kinds_cluster.py,
tests/apply/test_matrix_cluster.py): the `kube` and `cluster` fixtures, a Katalog around an
operatorBox, one sync, and reads of the live objects."""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.lifecycle.teardown import remove_finalizer
from orksync.model import Action, Change, ObjRef
from orksync.render.engine import render_catalog
from orksync.sync import SyncRequest, SyncResult, hook_renderers, sync_once
from testbed.controlplane import ControlPlane

WIDGET_API = "test.orksync.io/v1"
MERGE = "application/merge-patch+json"
OWNER_ANNOTATION = "orksync.io/owner"
WIDGET = "Widget.test.orksync.io"
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


class _NoAliases(yaml.SafeDumper):
    """Entries that share a dict are written out in full: the loader refuses YAML aliases
    beyond a few dozen (alias bombs)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def katalog(box: dict[str, Any], **entry: Any) -> str:
    """A Widget Katalog with operatorBox `box` (extra CRD-entry keys in `entry`)."""
    doc = {"apiVersion": "orkestra.orkspace.io/v1", "kind": "Katalog",
           "metadata": {"name": "widgets"},
           "spec": {"crds": {"widget": {"crdFile": "./crd.yaml", **entry,
                                        "operatorBox": box}}}}
    return yaml.dump(doc, Dumper=_NoAliases, sort_keys=False)


def sync(kube: Kube, root: Path, inventory: str) -> SyncResult:
    catalog = load_repository(root)
    rendered = render_catalog(catalog)
    assert rendered.ok, rendered.errors
    return sync_once(kube, SyncRequest(rendered, inventory_name=inventory,
                                       hooks=hook_renderers(catalog)))


def inventory_name() -> str:
    return f"kinds-{uuid.uuid4().hex[:8]}"


def get(kube: Kube, r: ObjRef) -> dict[str, Any] | None:
    return kube.get_or_none(kube.resource(r.api_version, r.kind), r.namespace, r.name)


def must(kube: Kube, r: ObjRef) -> dict[str, Any]:
    live = get(kube, r)
    assert live is not None, f"{r} is missing"
    return live


def patch(kube: Kube, r: ObjRef, body: Any, *, field_manager: str | None = None) -> None:
    res = kube.resource(r.api_version, r.kind)
    kube.request("PATCH", res.path(r.namespace, r.name), body=body, content_type=MERGE,
                 query={"fieldManager": field_manager})


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


def assert_not_written(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Nobody wrote the object between the two reads; for kinds a controller writes to,
    orksync did not (same generation, same managedFields entry of orksync)."""
    if before["kind"] in CONTROLLED:
        assert after["metadata"].get("generation") == before["metadata"].get("generation")
        assert written_by_orksync(after) == written_by_orksync(before)
    else:
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


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


def case_ref(key: str, ns: str) -> ObjRef:
    """The object CASES[key] renders for a Widget `w` in namespace `ns`."""
    api_version, kind, name = CASES[key][1]
    return ref(api_version, kind, name.format(ns=ns), "" if "{ns}" in name else ns)


def prepare(kube: Kube, cluster: Cluster, ns: str, keys: Iterable[str]) -> None:
    """What the cases of `keys` need in `ns` before a sync: the pod's ServiceAccount, and
    the cluster-scoped objects registered for removal afterwards."""
    for key in keys:
        obj = case_ref(key, ns)
        if not obj.namespace:
            cluster.cluster_scoped.append(obj)
        if key == "pods":
            create_service_account(kube, ns, "runner")

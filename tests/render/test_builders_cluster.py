"""Every builder's output is a valid object for the real API server.

Each test builds a realistic object and sends it as a server-side apply dry run: the API
server runs defaulting, validation and admission without storing anything, so a 422 (the
body is invalid) fails the test with the server's message.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.render.builders import BuildContext
from orksync.render.builders.profiles import (
    CONTAINER_SECURITY,
    HPA_BEHAVIORS,
    LIMIT_RANGES,
    NETWORK_POLICIES,
    PDB_BEHAVIORS,
    POD_SECURITY,
    PROBES,
    RESOURCE_QUOTAS,
    RESOURCES,
    ROLLING_UPDATE,
)
from orksync.render.kinds import BY_KEY
from testbed.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

FIELD_MANAGER = "orksync-test"
GADGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.builders.orksync.io"},
    "spec": {
        "group": "builders.orksync.io", "scope": "Namespaced",
        "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
            "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object", "required": ["size", "enabled"], "properties": {
                    "size": {"type": "integer"}, "enabled": {"type": "boolean"},
                    "ratio": {"type": "number"}, "owner": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "limits": {"type": "object", "additionalProperties": {
                        "type": "integer"}}}}}}}}],
    },
}


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        yield client
    finally:
        client.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def build(key: str, entry: Mapping[str, Any], namespace: str = "", *, name: str = "",
          cr_name: str = "shop") -> dict[str, Any]:
    spec = BY_KEY[key]
    assert spec.builder is not None
    ctx = BuildContext(cr_name=cr_name, cr_namespace=namespace or "default",
                       owner_key=cr_name, name=name or unique(key.lower()),
                       namespace=namespace if spec.namespaced else "",
                       labels={"app": "shop", "orkestra.orkspace.io/managed": "true",
                               "orkestra-owner": cr_name,
                               "app.kubernetes.io/managed-by": "orksync"})
    body = spec.builder(entry, ctx)
    return body if isinstance(body, dict) else body.body


def dry_run(kube: Kube, body: Mapping[str, Any]) -> dict[str, Any]:
    """Server-side apply with dryRun=All; a 422 fails the test with the server's message."""
    res = kube.resource(str(body["apiVersion"]), str(body["kind"]))
    try:
        _, live = kube.apply(res, body, field_manager=FIELD_MANAGER, force=True, dry_run=True)
    except ClusterError as err:
        if err.status != 422:
            raise
        message = str(err)
    else:
        assert isinstance(live, dict)
        return live
    pytest.fail(f"the API server rejects the built {body['kind']}: {message}", pytrace=False)


def apply(kube: Kube, body: Mapping[str, Any]) -> dict[str, Any]:
    res = kube.resource(str(body["apiVersion"]), str(body["kind"]))
    _, live = kube.apply(res, body, field_manager=FIELD_MANAGER, force=True)
    return live


POD_SHAPE: dict[str, Any] = {
    "image": "registry.example.com/shop:1.2", "port": "8080", "protocol": "TCP",
    "command": ["/bin/shop"], "args": ["--listen", ":8080"], "workingDirectory": "/srv",
    "imagePullSecrets": ["regcred", {"name": "other-regcred"}],
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "env": [
        {"name": "MODE", "value": "prod"},
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password",
                                                             "optional": "true"}}},
        {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "color"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                           "divisor": "1Mi"}}},
    ],
    "envFrom": {"secretRef": [{"name": "api", "keys": ["token"], "prefix": "API_",
                               "suffix": "_V1"}],
                "configMapRef": [{"name": "settings", "prefix": "S_", "optional": True}]},
    "resources": {"requests": {"cpu": "0.25", "memory": "256Mi"},
                  "limits": {"cpu": "1", "memory": "1Gi"}},
    "probes": {"startup": {"type": "tcp", "profile": "slow-start"},
               "liveness": {"type": "http", "path": "/healthz", "profile": "standard"},
               "readiness": {"type": "exec", "command": ["cat", "/tmp/ready"],
                             "periodSeconds": "5", "successThreshold": "2"}},
    "securityContext": {"profile": "restricted"},
    "podSecurity": {"profile": "hardened"},
    "volumes": [{"name": "config", "configMap": {"name": "cfg"}},
                {"name": "certs", "secret": {"name": "tls", "defaultMode": "0400"}},
                {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data",
                                                           "readOnly": "true"}},
                {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}}],
    "volumeMounts": [{"name": "config", "mountPath": "/etc/shop"},
                     {"name": "certs", "mountPath": "/etc/tls", "readOnly": True},
                     {"name": "cache", "mountPath": "/cache"},
                     {"name": "data", "mountPath": "/data", "subPath": "shop"},
                     {"name": "host", "mountPath": "/host-logs"}],
}


def test_a_namespace_with_extra_finalizers_is_valid(kube: Kube) -> None:
    live = dry_run(kube, build("namespaces", {"finalizers": ["orksync.io/cleanup"]}))
    assert live["metadata"]["finalizers"] == ["orksync.io/cleanup"]


def test_a_config_map_is_valid(kube: Kube, namespace: str) -> None:
    live = dry_run(kube, build("configMaps", {"data": {"color": "blue", "replicas": 3}},
                               namespace))
    assert live["data"] == {"color": "blue", "replicas": "3"}


@pytest.mark.parametrize("profile", list(NETWORK_POLICIES))
def test_every_network_policy_profile_is_valid(kube: Kube, namespace: str, profile: str) -> None:
    dry_run(kube, build("networkPolicies", {"profile": profile, "podSelector": {"app": "x"}},
                        namespace))


def test_a_network_policy_with_explicit_rules_is_valid(kube: Kube, namespace: str) -> None:
    entry = {"podSelector": {"app": "shop"},
             "ingress": [{"from": [{"podSelector": {"role": "front"}},
                                   {"namespaceSelector": {}},
                                   {"ipBlock": {"cidr": "10.0.0.0/8",
                                                "except": ["10.1.0.0/16"]}}],
                          "ports": [{"port": "8080"}, {"port": "http", "protocol": "TCP"},
                                    {"port": "9000", "endPort": "9010"}]}],
             "egress": [{"to": [{}], "ports": [{"protocol": "UDP", "port": "53"}]}]}
    live = dry_run(kube, build("networkPolicies", entry, namespace))
    assert live["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert live["spec"]["ingress"][0]["ports"][0] == {"protocol": "TCP", "port": 8080}


@pytest.mark.parametrize("profile", list(RESOURCE_QUOTAS))
def test_every_resource_quota_profile_is_valid(kube: Kube, namespace: str, profile: str) -> None:
    dry_run(kube, build("resourceQuotas", {"profile": profile}, namespace))


def test_a_resource_quota_with_explicit_limits_is_valid(kube: Kube, namespace: str) -> None:
    live = dry_run(kube, build("resourceQuotas", {"hard": {
        "pods": "10", "requests.cpu": "1.5", "limits.memory": "4096Mi",
        "persistentvolumeclaims": 4}}, namespace))
    assert live["spec"]["hard"] == {"pods": "10", "requests.cpu": "1500m",
                                    "limits.memory": "4Gi", "persistentvolumeclaims": "4"}


@pytest.mark.parametrize("profile", list(LIMIT_RANGES))
def test_every_limit_range_profile_is_valid(kube: Kube, namespace: str, profile: str) -> None:
    dry_run(kube, build("limitRanges", {"profile": profile}, namespace))


def test_a_limit_range_with_explicit_limits_is_valid(kube: Kube, namespace: str) -> None:
    dry_run(kube, build("limitRanges", {"limits": [
        {"type": "Container", "max": {"cpu": "2", "memory": "2Gi"},
         "min": {"cpu": "10m"}, "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "100m"},
         "maxLimitRequestRatio": {"cpu": "10"}},
        {"type": "PersistentVolumeClaim", "max": {"storage": "50Gi"}}]}, namespace))


def test_a_service_account_with_pull_secrets_is_valid(kube: Kube, namespace: str) -> None:
    live = dry_run(kube, build("serviceAccounts", {"imagePullSecrets": ["regcred"],
                                                   "automountServiceAccountToken": "false"},
                               namespace))
    assert live["automountServiceAccountToken"] is False


def test_roles_and_cluster_roles_are_valid(kube: Kube, namespace: str) -> None:
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"],
              "resourceNames": ["shop-config"]},
             {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}]
    dry_run(kube, build("roles", {"rules": rules}, namespace))
    dry_run(kube, build("clusterRoles", {"rules": rules}))


def test_role_bindings_and_cluster_role_bindings_are_valid(kube: Kube, namespace: str) -> None:
    subjects = [{"name": "shop-sa"}, {"kind": "User", "name": "alice"},
                {"kind": "group", "name": "devs"}]
    live = dry_run(kube, build("roleBindings", {"roleRef": {"name": "shop-role"},
                                                "subjects": subjects}, namespace))
    assert live["subjects"][0] == {"kind": "ServiceAccount", "name": "shop-sa",
                                   "namespace": namespace}
    dry_run(kube, build("roleBindings", {"roleRef": {"name": "view", "kind": "ClusterRole"},
                                         "subjects": subjects}, namespace))
    dry_run(kube, build("clusterRoleBindings", {"roleRef": {"name": "view"},
                                                "subjects": subjects}, namespace))


def test_a_built_in_kind_expressed_as_custom_is_valid(kube: Kube, namespace: str) -> None:
    entry = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": unique("cm"), "labels": {"tier": "web"},
                          "annotations": {"note": "custom"}},
             "data": {"size": "3", "flag": "true"}}
    live = dry_run(kube, build("custom", entry, namespace))
    assert live["data"] == {"size": "3", "flag": "true"}
    assert live["metadata"]["labels"]["tier"] == "web"
    cluster_entry = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                     "metadata": {"name": unique("cr"), "namespaced": "false"},
                     "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    body = build("custom", cluster_entry, namespace)
    assert "namespace" not in body["metadata"]
    dry_run(kube, body)


def test_a_custom_resource_spec_is_coerced_to_the_types_its_crd_declares(
        kube: Kube, namespace: str) -> None:
    apply(kube, GADGET_CRD)
    deadline = time.monotonic() + 30
    while True:
        try:
            kube.resource("builders.orksync.io/v1", "Gadget", refresh=True)
            break
        except ClusterError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    entry = {"apiVersion": "builders.orksync.io/v1", "kind": "Gadget",
             "metadata": {"name": "g1"},
             "spec": {"size": "3", "enabled": "true", "ratio": "0.5", "owner": "team-a",
                      "tags": '["a", "b"]', "limits": {"cpu": "2"}},
             "status": {"phase": "Ready"}, "hasStatus": True}
    body = build("custom", entry, namespace)
    assert "status" not in body
    live = dry_run(kube, body)
    assert live["spec"] == {"size": 3, "enabled": True, "ratio": 0.5, "owner": "team-a",
                            "tags": ["a", "b"], "limits": {"cpu": 2}}


def test_a_deployment_with_the_whole_pod_shape_is_valid(kube: Kube, namespace: str) -> None:
    entry = {**POD_SHAPE, "replicas": "3", "serviceAccountName": "shop-sa",
             "annotations": {"team": "a"}, "rollingUpdate": {"maxSurge": "25%",
                                                             "maxUnavailable": "1"}}
    live = dry_run(kube, build("deployments", entry, namespace))
    pod = live["spec"]["template"]["spec"]
    # Bug #7: these reach the object.
    assert pod["serviceAccountName"] == "shop-sa"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other-regcred"}]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["containers"][0]["workingDir"] == "/srv"
    assert pod["containers"][0]["resources"]["requests"]["cpu"] == "250m"
    assert live["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": 1}


@pytest.mark.parametrize("profile", list(ROLLING_UPDATE))
def test_every_rolling_update_profile_is_valid_for_deployments_and_stateful_sets(
        kube: Kube, namespace: str, profile: str) -> None:
    entry = {"image": "nginx", "rollingUpdate": {"profile": profile}}
    dry_run(kube, build("deployments", entry, namespace))
    dry_run(kube, build("statefulSets", entry, namespace))


@pytest.mark.parametrize("profile", list(RESOURCES))
def test_every_resources_profile_is_valid(kube: Kube, namespace: str, profile: str) -> None:
    dry_run(kube, build("deployments", {"image": "nginx", "resources": {"profile": profile}},
                        namespace))


@pytest.mark.parametrize("profile", list(PROBES))
def test_every_probe_profile_is_valid(kube: Kube, namespace: str, profile: str) -> None:
    probes = {kind: {"type": "http", "path": "/", "profile": profile}
              for kind in ("startup", "liveness", "readiness")}
    dry_run(kube, build("deployments", {"image": "nginx", "port": "80", "probes": probes},
                        namespace))


def test_a_grpc_probe_is_valid(kube: Kube, namespace: str) -> None:
    dry_run(kube, build("deployments", {"image": "nginx", "port": "9090", "probes": {
        "liveness": {"type": "grpc", "service": "health"}}}, namespace))


@pytest.mark.parametrize("profile", list(CONTAINER_SECURITY))
def test_every_security_profile_is_valid(kube: Kube, namespace: str, profile: str) -> None:
    assert profile in POD_SECURITY
    dry_run(kube, build("deployments", {"image": "nginx", "securityContext": {"profile": profile},
                                        "podSecurity": {"profile": profile}}, namespace))


def test_explicit_security_fields_are_valid(kube: Kube, namespace: str) -> None:
    dry_run(kube, build("deployments", {"image": "nginx", "securityContext": {
        "runAsNonRoot": "true", "runAsUser": "1000", "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"}},
        "podSecurity": {"fsGroup": "2000", "supplementalGroups": [3000]}}, namespace))


def test_a_replica_set_is_valid(kube: Kube, namespace: str) -> None:
    dry_run(kube, build("replicaSets", {**POD_SHAPE, "replicas": "2"}, namespace))


def test_a_stateful_set_with_claim_templates_is_valid(kube: Kube, namespace: str) -> None:
    entry = {"image": "postgres", "tag": "16", "port": "5432", "replicas": "3",
             "volumeClaimTemplates": [
                 {"storageSize": "10Gi", "storageClass": "fast"},
                 {"name": "wal", "storageSize": "1.5Gi", "mountPath": "/wal",
                  "accessModes": ["ReadWriteOncePod"]}],
             "volumes": [{"name": "config", "configMap": {"name": "pg"}}],
             "volumeMounts": [{"name": "config", "mountPath": "/etc/pg"}]}
    live = dry_run(kube, build("statefulSets", entry, namespace, name="db"))
    assert live["spec"]["serviceName"] == "db"
    assert live["spec"]["updateStrategy"] == {"type": "OnDelete"}
    claims = live["spec"]["volumeClaimTemplates"]
    assert claims[1]["spec"]["resources"]["requests"]["storage"] == "1536Mi"
    assert "storageClassName" not in claims[1]["spec"]


def test_a_job_is_valid(kube: Kube, namespace: str) -> None:
    live = dry_run(kube, build("jobs", {**POD_SHAPE, "command": ["sh", "-c", "echo hi"]},
                               namespace))
    assert live["spec"]["backoffLimit"] == 3
    assert live["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


def test_a_cron_job_keeps_suspend_history_concurrency_and_deadline(
        kube: Kube, namespace: str) -> None:
    # Bug #8: these fields were dropped by the studied Orkestra.
    entry = {"image": "busybox", "schedule": "*/5 * * * *", "suspend": "true",
             "successfulJobsHistoryLimit": "5", "failedJobsHistoryLimit": "2",
             "concurrencyPolicy": "forbid", "startingDeadlineSeconds": "120",
             "command": ["date"], "serviceAccountName": "cron"}
    spec = dry_run(kube, build("cronJobs", entry, namespace))["spec"]
    assert (spec["suspend"], spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"],
            spec["concurrencyPolicy"], spec["startingDeadlineSeconds"]) == \
        (True, 5, 2, "Forbid", 120)


def test_persistent_volumes_and_claims_are_valid(kube: Kube, namespace: str) -> None:
    dry_run(kube, build("persistentVolumes", {"capacity": "5Gi", "hostPath": "/mnt/data"}))
    live = dry_run(kube, build("persistentVolumes", {
        "capacity": "100Gi", "csiDriver": "ebs.csi.aws.com", "csiVolumeHandle": "vol-123",
        "accessModes": ["ReadWriteMany"], "reclaimPolicy": "delete",
        "storageClassName": "gp3"}))
    assert live["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    dry_run(kube, build("persistentVolumeClaims", {"storage": "10Gi", "volumeMode": "Block",
                                                   "storageClassName": "fast"}, namespace))


def test_services_of_every_type_are_valid(kube: Kube, namespace: str) -> None:
    live = dry_run(kube, build("services", {"port": "80", "targetPort": "http",
                                            "headless": "true"}, namespace))
    assert live["spec"]["clusterIP"] == "None"  # bug #9
    node_port = random.randint(30000, 32767)
    live = dry_run(kube, build("services", {"type": "NodePort", "port": "80",
                                            "nodePort": str(node_port)}, namespace))
    assert live["spec"]["ports"][0]["nodePort"] == node_port
    dry_run(kube, build("services", {"type": "LoadBalancer", "port": "443",
                                     "protocol": "tcp"}, namespace))


def test_an_ingress_with_tls_is_valid(kube: Kube, namespace: str) -> None:
    entry = {"host": "shop.example.com", "serviceName": "shop-svc", "servicePort": "80",
             "path": "/api", "pathType": "exact", "className": "nginx",
             "annotations": {"nginx.ingress.kubernetes.io/ssl-redirect": "true"},
             "tls": {"create": True}}
    live = dry_run(kube, build("ingresses", entry, namespace))
    assert live["spec"]["tls"] == [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]


@pytest.mark.parametrize("profile", list(HPA_BEHAVIORS))
def test_every_hpa_behavior_profile_is_valid(kube: Kube, namespace: str, profile: str) -> None:
    dry_run(kube, build("hpa", {"scaleTargetRef": {"apiVersion": "apps/v1",
                                                   "kind": "Deployment"},
                                "minReplicas": "2", "maxReplicas": "10",
                                "behavior": {"profile": profile}}, namespace))


def test_an_hpa_with_explicit_behavior_is_valid(kube: Kube, namespace: str) -> None:
    live = dry_run(kube, build("hpa", {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"},
        "maxReplicas": "4", "targetCPUUtilizationPercentage": "75",
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": "60", "selectPolicy": "min",
                                   "policies": [{"type": "Pods", "value": "1",
                                                 "periodSeconds": "30"}]}}}, namespace))
    assert live["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 75


@pytest.mark.parametrize("profile", list(PDB_BEHAVIORS))
def test_every_pdb_profile_is_valid(kube: Kube, namespace: str, profile: str) -> None:
    dry_run(kube, build("pdb", {"behavior": {"profile": profile}, "selector": {"app": "shop"}},
                        namespace))


def test_a_pdb_with_a_percentage_and_no_selector_is_valid(kube: Kube, namespace: str) -> None:
    live = dry_run(kube, build("pdb", {"minAvailable": "50%"}, namespace))
    assert live["spec"]["minAvailable"] == "50%"
    assert live["spec"]["selector"] == {}


def test_a_pod_with_the_whole_pod_shape_is_valid(kube: Kube, namespace: str) -> None:
    # The ServiceAccount admission plugin wants the pod's account to exist: create it.
    apply(kube, build("serviceAccounts", {}, namespace, name="shop-sa"))
    live = dry_run(kube, build("pods", {**POD_SHAPE, "serviceAccountName": "shop-sa",
                                        "annotations": {"team": "a"}}, namespace))
    assert live["spec"]["restartPolicy"] == "Always"
    env = {e["name"] for e in live["spec"]["containers"][0]["env"]}
    assert "API_token_V1" in env

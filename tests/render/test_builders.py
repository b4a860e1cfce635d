"""The builders: defaults, coercion, profiles, the fixed Orkestra bugs and every BuildError.

Pure unit tests; tests/render/test_builders_cluster.py proves the same objects valid against a
real API server.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from orksync.render.builders import BuildContext, BuildError
from orksync.render.builders.fields import ACCEPTED, unknown_fields, unknown_paths
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
from orksync.render.kinds import BY_KEY, KINDS

LABELS = {"orkestra-owner": "shop", "orkestra.orkspace.io/managed": "true"}


def ctx(key: str = "deployments", **kw: Any) -> BuildContext:
    namespaced = BY_KEY[key].namespaced
    base: dict[str, Any] = {"cr_name": "shop", "cr_namespace": "team-a", "owner_key": "shop",
                            "name": "web", "namespace": "team-a" if namespaced else "",
                            "labels": LABELS}
    return BuildContext(**{**base, **kw})


def build(key: str, entry: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
    builder = BY_KEY[key].builder
    assert builder is not None
    body = builder(entry, ctx(key, **kw))
    assert isinstance(body, dict)
    return body


def error(key: str, entry: Mapping[str, Any], **kw: Any) -> BuildError:
    with pytest.raises(BuildError) as caught:
        build(key, entry, **kw)
    return caught.value


def container(body: Mapping[str, Any]) -> dict[str, Any]:
    spec = body["spec"]
    if "jobTemplate" in spec:
        spec = spec["jobTemplate"]["spec"]
    pod = spec["template"]["spec"] if "template" in spec else spec
    return pod["containers"][0]


def pod(body: Mapping[str, Any]) -> dict[str, Any]:
    spec = body["spec"]
    if "jobTemplate" in spec:
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"] if "template" in spec else spec


WORKLOADS = ("deployments", "replicaSets", "statefulSets", "jobs", "cronJobs", "pods")


def workload(key: str, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"image": "nginx", **extra}
    if key == "cronJobs":
        entry.setdefault("schedule", "* * * * *")
    return entry


# --- the registry --------------------------------------------------------------------------


def test_every_kind_has_a_builder_and_all_but_secrets_a_field_list() -> None:
    assert [k.key for k in KINDS if k.builder is None] == []
    assert set(ACCEPTED) == {k.key for k in KINDS} - {"secrets"}


# --- Deployment and the pod shape -------------------------------------------------------


def test_a_minimal_deployment_is_exactly_what_it_was_before() -> None:
    assert build("deployments", {"image": "nginx:1", "port": "8080", "replicas": "2"}) == {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a", "labels": LABELS},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"orkestra-owner": "shop"}},
                 "template": {"metadata": {"labels": LABELS}, "spec": {"containers": [{
                     "name": "web", "image": "nginx:1",
                     "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]}}}}


@pytest.mark.parametrize(("replicas", "expected"), [
    ("", 1), ("abc", 1), ("-2", 1), ("0", 0), ("3", 3), ("3abc", 3), (4, 4), (None, 1)])
def test_replicas_are_read_like_orkestra_with_1_as_the_fallback(replicas: Any,
                                                                expected: int) -> None:
    for key in ("deployments", "replicaSets", "statefulSets"):
        assert build(key, {"image": "x", "replicas": replicas})["spec"]["replicas"] == expected


@pytest.mark.parametrize("port", ["", "0", "abc", "70000", "-1"])
def test_an_invalid_or_zero_port_means_no_container_port(port: str) -> None:
    assert "ports" not in container(build("deployments", {"image": "x", "port": port}))


def test_the_pod_port_is_read_with_sscanf_like_orkestra() -> None:
    assert container(build("pods", {"image": "x", "port": "80abc"}))["ports"][0][
        "containerPort"] == 80
    assert "ports" not in container(build("deployments", {"image": "x", "port": "80abc"}))


@pytest.mark.parametrize("key", WORKLOADS)
def test_bug_7_pod_fields_reach_every_workload(key: str) -> None:
    # §7.2 #7: serviceAccountName, imagePullSecrets, nodeSelector, workingDirectory and
    # protocol were not propagated by the studied Orkestra builder.
    body = build(key, workload(key, serviceAccountName="runner",
                               imagePullSecrets=["regcred", {"name": "other"}],
                               nodeSelector={"disk": "ssd"}, workingDirectory="/srv",
                               port="53", protocol="udp", command=["dig"], args=["-v"]))
    spec, c = pod(body), container(body)
    assert spec["serviceAccountName"] == "runner"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other"}]
    assert spec["nodeSelector"] == {"disk": "ssd"}
    assert c["workingDir"] == "/srv"
    assert c["ports"] == [{"containerPort": 53, "protocol": "UDP"}]
    assert (c["command"], c["args"]) == (["dig"], ["-v"])


@pytest.mark.parametrize(("key", "policy"), [
    ("pods", "Always"), ("jobs", "OnFailure"), ("cronJobs", "OnFailure"),
    ("deployments", None)])
def test_each_workload_kind_gets_its_restart_policy(key: str, policy: str | None) -> None:
    assert pod(build(key, workload(key))).get("restartPolicy") == policy


def test_env_entries_are_built_in_the_list_form_with_every_value_source() -> None:
    c = container(build("deployments", {"image": "x", "env": [
        {"name": "A", "value": 3}, {"name": "B", "value": True}, {"name": "C"},
        {"name": "D", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k",
                                                     "optional": "yes"}}},
        {"name": "E", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
        {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "G", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                         "divisor": "0.001"}}}]}))
    assert c["env"] == [
        {"name": "A", "value": "3"}, {"name": "B", "value": "true"}, {"name": "C", "value": ""},
        {"name": "D", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": True}}},
        {"name": "E", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
        {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "G", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                         "divisor": "1m"}}}]


def test_env_from_imports_whole_sources_and_expands_listed_keys_with_prefix_and_suffix() -> None:
    c = container(build("deployments", {"image": "x", "env": [{"name": "A", "value": "1"}],
                                        "envFrom": {
        "secretRef": [{"name": "db", "keys": ["user", "pass"], "prefix": "DB_",
                       "suffix": "_V2", "optional": "true"}, {"name": "all"}],
        "configMapRef": [{"name": "cfg", "prefix": "CFG_", "optional": False}]}}))
    assert c["envFrom"] == [{"secretRef": {"name": "all"}},
                            {"configMapRef": {"name": "cfg", "optional": False},
                             "prefix": "CFG_"}]
    assert c["env"] == [
        {"name": "A", "value": "1"},
        {"name": "DB_user_V2", "valueFrom": {"secretKeyRef": {"name": "db", "optional": True,
                                                              "key": "user"}}},
        {"name": "DB_pass_V2", "valueFrom": {"secretKeyRef": {"name": "db", "optional": True,
                                                              "key": "pass"}}}]


def test_explicit_resources_are_validated_and_written_in_canonical_form() -> None:
    c = container(build("deployments", {"image": "x", "resources": {
        "requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"cpu": 2, "memory": "1.5Gi",
                                                                    "nvidia.com/gpu": "1"}}}))
    assert c["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"},
                              "limits": {"cpu": "2", "memory": "1536Mi", "nvidia.com/gpu": "1"}}


@pytest.mark.parametrize("name", list(RESOURCES))
def test_every_resources_profile_expands_to_requests_and_limits(name: str) -> None:
    c = container(build("deployments", {"image": "x", "resources": {"profile": name.upper()}}))
    assert c["resources"] == RESOURCES[name]


def test_the_medium_resources_profile_has_orkestras_documented_values() -> None:
    assert RESOURCES["medium"] == {"requests": {"cpu": "250m", "memory": "256Mi"},
                                   "limits": {"cpu": "1", "memory": "1Gi"}}


def test_a_profile_expansion_is_a_copy_that_callers_may_change() -> None:
    body = build("deployments", {"image": "x", "resources": {"profile": "small"}})
    container(body)["resources"]["limits"]["cpu"] = "9"
    assert RESOURCES["small"]["limits"]["cpu"] == "500m"


def test_an_http_probe_without_profile_gets_the_standard_timings_and_the_container_port() -> None:
    c = container(build("deployments", {"image": "x", "port": "8080", "probes": {
        "liveness": {"path": "/healthz"}}}))
    assert c["livenessProbe"] == {**PROBES["standard"],
                                  "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}}


@pytest.mark.parametrize("name", list(PROBES))
def test_every_probe_profile_sets_its_timings(name: str) -> None:
    c = container(build("deployments", {"image": "x", "probes": {
        "readiness": {"type": "tcp", "port": "9000", "profile": name}}}))
    assert c["readinessProbe"] == {**PROBES[name], "tcpSocket": {"port": 9000}}


def test_probe_profiles_match_orkestras_table_and_slow_is_patient() -> None:
    assert PROBES["fast"]["initialDelaySeconds"] == 5 and PROBES["fast"]["failureThreshold"] == 2
    assert PROBES["slow-start"]["failureThreshold"] == 30
    assert PROBES["slow"] == PROBES["patient"]


def test_exec_grpc_and_named_port_probes_are_built() -> None:
    c = container(build("deployments", {"image": "x", "port": "9090", "probes": {
        "startup": {"type": "exec", "command": ["cat", "/ready"]},
        "liveness": {"type": "grpc", "service": "health"},
        "readiness": {"type": "HTTP", "port": "http", "periodSeconds": "5",
                      "successThreshold": "2"}}}))
    assert c["startupProbe"]["exec"] == {"command": ["cat", "/ready"]}
    assert c["livenessProbe"]["grpc"] == {"port": 9090, "service": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/", "port": "http", "scheme": "HTTP"}
    assert (c["readinessProbe"]["periodSeconds"], c["readinessProbe"]["successThreshold"]) == \
        (5, 2)


@pytest.mark.parametrize("name", list(CONTAINER_SECURITY))
def test_every_security_profile_expands_at_container_and_pod_level(name: str) -> None:
    body = build("deployments", {"image": "x", "securityContext": {"profile": name},
                                 "podSecurity": {"profile": name}})
    assert container(body)["securityContext"] == CONTAINER_SECURITY[name]
    assert pod(body)["securityContext"] == POD_SECURITY[name]


def test_security_profiles_match_orkestras_table() -> None:
    assert CONTAINER_SECURITY["hardened"]["readOnlyRootFilesystem"] is True
    assert CONTAINER_SECURITY["baseline"]["capabilities"] == {"drop": ["NET_RAW"]}
    assert POD_SECURITY["restricted"] == {"runAsNonRoot": True, "runAsUser": 1000}


def test_explicit_security_fields_are_typed_and_passed_through() -> None:
    body = build("deployments", {"image": "x", "securityContext": {
        "runAsNonRoot": "true", "runAsUser": "1000", "readOnlyRootFilesystem": "",
        "capabilities": {"add": ["NET_BIND_SERVICE"]},
        "seccompProfile": {"type": "RuntimeDefault"}},
        "podSecurity": {"fsGroup": 2000, "supplementalGroups": [1]}})
    assert container(body)["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 1000, "capabilities": {"add": ["NET_BIND_SERVICE"]},
        "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod(body)["securityContext"] == {"fsGroup": 2000, "supplementalGroups": [1]}


def test_volumes_of_every_source_and_their_mounts_are_built() -> None:
    body = build("deployments", {"image": "x", "volumes": [
        {"name": "a", "configMap": {"name": "cm", "defaultMode": "0644"}},
        {"name": "b", "secret": {"name": "s", "optional": "true"}},
        {"name": "c", "emptyDir": {"medium": "memory", "sizeLimit": "0.5Gi"}},
        {"name": "d", "persistentVolumeClaim": {"claimName": "pvc", "readOnly": "true"}},
        {"name": "e", "hostPath": {"path": "/var/log"}}],
        "volumeMounts": [{"name": "a", "mountPath": "/a", "subPath": "x", "readOnly": "true"},
                         {"name": "e", "mountPath": "/e"}]})
    assert pod(body)["volumes"] == [
        {"name": "a", "configMap": {"name": "cm", "defaultMode": 420}},
        {"name": "b", "secret": {"secretName": "s", "optional": True}},
        {"name": "c", "emptyDir": {"medium": "Memory", "sizeLimit": "512Mi"}},
        {"name": "d", "persistentVolumeClaim": {"claimName": "pvc", "readOnly": True}},
        {"name": "e", "hostPath": {"path": "/var/log"}}]
    assert container(body)["volumeMounts"] == [
        {"name": "a", "mountPath": "/a", "subPath": "x", "readOnly": True},
        {"name": "e", "mountPath": "/e"}]


def test_a_deployment_carries_annotations_on_the_object_only() -> None:
    body = build("deployments", {"image": "x", "annotations": {"team": "a", "n": 1}})
    assert body["metadata"]["annotations"] == {"team": "a", "n": "1"}
    assert "annotations" not in body["spec"]["template"]["metadata"]


@pytest.mark.parametrize("name", list(ROLLING_UPDATE))
def test_every_rolling_update_profile_sets_the_deployment_strategy(name: str) -> None:
    surge, unavailable = ROLLING_UPDATE[name]
    assert build("deployments", {"image": "x", "rollingUpdate": {"profile": name}})["spec"][
        "strategy"] == {"type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}


def test_rolling_update_profiles_match_orkestras_table() -> None:
    assert ROLLING_UPDATE == {"safe": (1, 0), "fast": ("25%", "25%"),
                              "blue-green": ("100%", 0)}


def test_an_explicit_rolling_update_reads_numbers_and_percentages() -> None:
    assert build("deployments", {"image": "x", "rollingUpdate": {
        "maxSurge": "2", "maxUnavailable": "10%"}})["spec"]["strategy"]["rollingUpdate"] == \
        {"maxSurge": 2, "maxUnavailable": "10%"}
    assert "strategy" not in build("deployments", {"image": "x"})["spec"]


def test_a_replica_set_has_the_deployment_pod_shape_and_no_strategy() -> None:
    body = build("replicaSets", {"image": "x", "replicas": "2"})
    assert body["kind"] == "ReplicaSet" and "strategy" not in body["spec"]
    assert body["spec"]["selector"] == {"matchLabels": {"orkestra-owner": "shop"}}


# --- StatefulSet ------------------------------------------------------------------------


def test_a_stateful_set_has_orkestras_defaults() -> None:
    spec = build("statefulSets", {"image": "postgres", "tag": "16",
                                  "volumeClaimTemplates": [{"storageSize": "10Gi"}]})["spec"]
    assert spec["serviceName"] == "web"
    assert spec["updateStrategy"] == {"type": "OnDelete"}
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["template"]["spec"]["containers"][0]["image"] == "postgres:16"
    assert spec["template"]["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"}]
    # storageClassName only when a class is given (Orkestra always sets the pointer).
    assert spec["volumeClaimTemplates"] == [{"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}]


def test_a_stateful_set_claim_template_takes_its_class_modes_and_mount_path() -> None:
    spec = build("statefulSets", {"image": "x", "serviceName": "db-headless",
                                  "volumeClaimTemplates": [{
                                      "name": "wal", "storageClass": "fast",
                                      "storageSize": "1.5Gi", "mountPath": "/wal",
                                      "accessModes": ["readwriteoncepod"]}]})["spec"]
    assert spec["serviceName"] == "db-headless"
    assert spec["volumeClaimTemplates"][0]["spec"] == {
        "accessModes": ["ReadWriteOncePod"], "storageClassName": "fast",
        "resources": {"requests": {"storage": "1536Mi"}}}


def test_bug_16_an_invalid_storage_size_is_an_error_not_a_panic() -> None:
    # §7.2 #16: Orkestra's MustParse panics the worker on a bad size.
    err = error("statefulSets", {"image": "x", "volumeClaimTemplates": [
        {"storageSize": "10Gi"}, {"name": "b", "storageSize": "ten gigs"}]})
    assert err.field == "volumeClaimTemplates[1].storageSize"
    assert "ten gigs" in str(err) and "quantity" in str(err)
    assert error("persistentVolumeClaims", {"storage": "lots"}).field == "storage"


@pytest.mark.parametrize(("name", "expected"), [
    ("safe", {"type": "RollingUpdate"}), ("blue-green", {"type": "RollingUpdate"}),
    ("fast", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}})])
def test_a_stateful_set_rolling_profile_uses_max_unavailable_only(name: str,
                                                                  expected: dict) -> None:
    assert build("statefulSets", {"image": "x", "rollingUpdate": {"profile": name}})["spec"][
        "updateStrategy"] == expected


# --- Job and CronJob --------------------------------------------------------------------


def test_a_job_defaults_backoff_limit_to_3_and_restarts_on_failure() -> None:
    body = build("jobs", {"image": "busybox", "command": ["sh", "-c", "echo {{x}}"]})
    assert body["spec"]["backoffLimit"] == 3
    assert "selector" not in body["spec"]
    assert container(body)["command"] == ["sh", "-c", "echo {{x}}"]
    assert build("jobs", {"image": "x", "backoffLimit": 0})["spec"]["backoffLimit"] == 0


def test_a_cron_job_has_orkestras_defaults() -> None:
    spec = build("cronJobs", {"image": "x", "schedule": "0 * * * *"})["spec"]
    assert (spec["suspend"], spec["concurrencyPolicy"], spec["successfulJobsHistoryLimit"],
            spec["failedJobsHistoryLimit"]) == (False, "Allow", 3, 1)
    assert "startingDeadlineSeconds" not in spec
    assert spec["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


@pytest.mark.parametrize(("policy", "expected"), [
    ("allow", "Allow"), ("forbid", "Forbid"), ("replace", "Replace"), ("FORBID", "Forbid"),
    ("", "Allow")])
def test_bug_8_cron_job_fields_are_honoured(policy: str, expected: str) -> None:
    # §7.2 #8: suspend, the history limits, concurrencyPolicy and startingDeadlineSeconds
    # were dropped by the studied Orkestra resolver.
    spec = build("cronJobs", {"image": "x", "schedule": "@hourly", "suspend": "true",
                              "successfulJobsHistoryLimit": "10",
                              "failedJobsHistoryLimit": 0, "concurrencyPolicy": policy,
                              "startingDeadlineSeconds": "200"})["spec"]
    assert (spec["suspend"], spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"],
            spec["concurrencyPolicy"], spec["startingDeadlineSeconds"]) == \
        (True, 10, 0, expected, 200)


# --- Service, Ingress, NetworkPolicy ----------------------------------------------------


def test_a_service_keeps_its_existing_shape() -> None:
    assert build("services", {"port": "80", "selector": {"app": "web"}}, name="web-svc") == {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web-svc", "namespace": "team-a", "labels": LABELS},
        "spec": {"type": "ClusterIP", "selector": {"app": "web", "orkestra-owner": "shop"},
                 "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"}]}}


@pytest.mark.parametrize(("target", "expected"), [
    ("8080", 8080), ("", 80), ("0", 80), ("99999", 80), ("http", "http")])
def test_a_service_target_port_defaults_to_the_port_and_may_be_named(target: str,
                                                                    expected: Any) -> None:
    assert build("services", {"port": "80", "targetPort": target})["spec"]["ports"][0][
        "targetPort"] == expected


def test_bug_9_a_headless_service_has_cluster_ip_none() -> None:
    # §7.2 #9: Orkestra's dead code would have set the type to "None".
    spec = build("services", {"port": "80", "headless": "true"})["spec"]
    assert spec["clusterIP"] == "None" and spec["type"] == "ClusterIP"
    assert "clusterIP" not in build("services", {"port": "80", "headless": False})["spec"]


def test_a_node_port_service_takes_its_node_port() -> None:
    spec = build("services", {"port": "80", "type": "NodePort", "nodePort": "30080"})["spec"]
    assert spec["ports"][0]["nodePort"] == 30080


def test_an_ingress_has_one_rule_with_orkestras_defaults() -> None:
    body = build("ingresses", {"host": "a.example.com", "serviceName": "web",
                               "servicePort": "8080"})
    assert body["spec"] == {"rules": [{"host": "a.example.com", "http": {"paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 8080}}}}]}}]}


def test_an_ingress_with_tls_create_references_the_cr_tls_secret() -> None:
    body = build("ingresses", {"host": "a.example.com", "serviceName": "web",
                               "servicePort": "80", "className": "nginx",
                               "annotations": {"x": "y"}, "tls": {"create": "true"}})
    assert body["spec"]["ingressClassName"] == "nginx"
    assert body["spec"]["tls"] == [{"hosts": ["a.example.com"], "secretName": "shop-tls"}]
    assert body["metadata"]["annotations"] == {"x": "y"}
    named = build("ingresses", {"serviceName": "web", "servicePort": "80",
                                "tls": {"secretName": "mine", "hosts": ["b.example.com"]}})
    assert named["spec"]["tls"] == [{"hosts": ["b.example.com"], "secretName": "mine"}]
    assert "tls" not in build("ingresses", {"serviceName": "w", "servicePort": "80",
                                            "tls": {"create": False}})["spec"]


@pytest.mark.parametrize("name", list(NETWORK_POLICIES))
def test_every_network_policy_profile_expands_its_rules(name: str) -> None:
    spec = build("networkPolicies", {"profile": name, "podSelector": {"app": "web"}})["spec"]
    assert spec == {"podSelector": {"matchLabels": {"app": "web"}}, **NETWORK_POLICIES[name]}


def test_the_allow_dns_egress_profile_opens_port_53_over_udp_and_tcp() -> None:
    assert NETWORK_POLICIES["allow-dns-egress"]["egress"] == [{"ports": [
        {"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]


def test_network_policy_rules_convert_ports_and_derive_policy_types() -> None:
    spec = build("networkPolicies", {"ingress": [{
        "from": [{}, {"namespaceSelector": {}}, {"podSelector": {"a": "b"},
                                                 "namespaceSelector": {"team": "x"}}],
        "ports": [{"port": "80"}, {"port": "http", "protocol": "udp"}]}], "egress": []})["spec"]
    assert spec == {"podSelector": {}, "ingress": [{
        "from": [{"podSelector": {}}, {"namespaceSelector": {}},
                 {"podSelector": {"matchLabels": {"a": "b"}},
                  "namespaceSelector": {"matchLabels": {"team": "x"}}}],
        "ports": [{"protocol": "TCP", "port": 80}, {"protocol": "UDP", "port": "http"}]}],
        "policyTypes": ["Ingress", "Egress"]}
    only_egress = build("networkPolicies", {"egress": [{"to": [{"ipBlock": {
        "cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}]})["spec"]
    assert only_egress["policyTypes"] == ["Egress"]
    assert only_egress["egress"][0]["to"] == [{"ipBlock": {"cidr": "10.0.0.0/8",
                                                           "except": ["10.1.0.0/16"]}}]
    assert "policyTypes" not in build("networkPolicies", {})["spec"]
    assert build("networkPolicies", {"ingress": [], "policyTypes": ["egress"]})["spec"][
        "policyTypes"] == ["Egress"]


# --- tenancy, RBAC, storage ----------------------------------------------------------------


def test_a_namespace_puts_extra_finalizers_on_its_metadata() -> None:
    body = build("namespaces", {"finalizers": ["x.io/a", "x.io/a", "x.io/b"]})
    assert body == {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "web", "labels": LABELS, "finalizers": ["x.io/a", "x.io/b"]}}


def test_a_config_map_writes_every_data_value_as_text() -> None:
    body = build("configMaps", {"data": {"a": 1, "b": True, "c": "x", "d": None},
                                "fromConfigMap": "base", "toNamespaces": ["a"]})
    assert body["data"] == {"a": "1", "b": "true", "c": "x", "d": ""}
    assert "data" not in build("configMaps", {})


def test_a_config_map_keeps_data_text_verbatim_spaces_included() -> None:
    # Orkestra writes a text without `{{` as it is; a config file's final newline stays
    body = build("configMaps", {"data": {"p": "  plain text  ", "f": "a = 1\n"}})
    assert body["data"] == {"p": "  plain text  ", "f": "a = 1\n"}


@pytest.mark.parametrize("name", list(RESOURCE_QUOTAS))
def test_every_resource_quota_profile_sets_hard_limits(name: str) -> None:
    assert build("resourceQuotas", {"profile": name})["spec"] == {"hard": RESOURCE_QUOTAS[name]}


def test_resource_quota_profiles_match_orkestras_table() -> None:
    assert RESOURCE_QUOTAS["small"]["pods"] == "10"
    assert RESOURCE_QUOTAS["xlarge"]["limits.memory"] == "32Gi"


def test_an_invalid_quota_value_is_an_error_naming_its_key_instead_of_vanishing() -> None:
    assert build("resourceQuotas", {"hard": {"pods": "10", "cpu": "1.5"}})["spec"] == {
        "hard": {"pods": "10", "cpu": "1500m"}}
    err = error("resourceQuotas", {"hard": {"pods": "10", "requests.memory": ""}})
    assert err.field == "hard.requests.memory" and "empty" in str(err)


@pytest.mark.parametrize("name", list(LIMIT_RANGES))
def test_every_limit_range_profile_sets_container_defaults(name: str) -> None:
    spec = build("limitRanges", {"profile": name})["spec"]
    assert spec == {"limits": LIMIT_RANGES[name]}
    assert spec["limits"][0]["type"] == "Container"


def test_explicit_limit_range_items_are_validated_quantities() -> None:
    assert build("limitRanges", {"limits": [{"type": "container", "max": {"cpu": "2000m"},
                                             "defaultRequest": {"memory": "0.5Gi"}}]})[
        "spec"] == {"limits": [{"type": "Container", "max": {"cpu": "2"},
                                "defaultRequest": {"memory": "512Mi"}}]}


def test_a_service_account_takes_pull_secrets_and_the_automount_flag() -> None:
    body = build("serviceAccounts", {"imagePullSecrets": ["a"],
                                     "automountServiceAccountToken": "false"})
    assert body["imagePullSecrets"] == [{"name": "a"}]
    assert body["automountServiceAccountToken"] is False
    assert "automountServiceAccountToken" not in build("serviceAccounts", {})


def test_roles_keep_their_rules_without_empty_lists() -> None:
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"],
              "resourceNames": ["web"]}, {"apiGroups": ["apps"], "resources": ["deployments"],
                                          "verbs": ["*"]}]
    assert build("roles", {"rules": rules})["rules"] == rules
    assert build("clusterRoles", {"rules": rules})["kind"] == "ClusterRole"


def test_a_role_binding_defaults_its_role_kind_and_service_account_subjects() -> None:
    body = build("roleBindings", {"roleRef": {"name": "r"}, "subjects": [
        {"name": "sa"}, {"name": "other", "namespace": "x"}, {"kind": "user", "name": "bob"}]})
    assert body["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                               "name": "r"}
    assert body["subjects"] == [
        {"kind": "ServiceAccount", "name": "sa", "namespace": "team-a"},
        {"kind": "ServiceAccount", "name": "other", "namespace": "x"},
        {"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]


def test_a_cluster_role_binding_binds_a_cluster_role_and_defaults_to_the_cr_namespace() -> None:
    body = build("clusterRoleBindings", {"roleRef": {"name": "view"},
                                         "subjects": [{"name": "sa"}]})
    assert body["roleRef"]["kind"] == "ClusterRole"
    assert body["subjects"] == [{"kind": "ServiceAccount", "name": "sa", "namespace": "team-a"}]
    assert "namespace" not in body["metadata"]


def test_a_claim_has_orkestras_defaults() -> None:
    assert build("persistentVolumeClaims", {"storage": "10Gi"})["spec"] == {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
        "volumeMode": "Filesystem"}
    spec = build("persistentVolumeClaims", {"storage": "1G", "storageClassName": "fast",
                                            "volumeName": "pv1", "volumeMode": "block"})["spec"]
    assert (spec["storageClassName"], spec["volumeName"], spec["volumeMode"]) == \
        ("fast", "pv1", "Block")


def test_a_persistent_volume_has_orkestras_defaults_and_one_source() -> None:
    assert build("persistentVolumes", {"capacity": "5Gi", "hostPath": "/mnt"})["spec"] == {
        "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/mnt"}}
    spec = build("persistentVolumes", {"capacity": "5Gi", "csiDriver": "d",
                                       "csiVolumeHandle": "h", "storageClassName": "gp3"})["spec"]
    assert spec["csi"] == {"driver": "d", "volumeHandle": "h"}
    assert spec["storageClassName"] == "gp3"


# --- HPA, PDB ----------------------------------------------------------------------------


def test_an_hpa_has_orkestras_defaults_and_targets_the_cr_by_name() -> None:
    spec = build("hpa", {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment"}})[
        "spec"]
    assert spec == {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "name": "shop"}, "minReplicas": 1, "maxReplicas": 1}


def test_an_hpa_target_cpu_becomes_a_utilisation_metric() -> None:
    spec = build("hpa", {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "web"}, "minReplicas": "2",
                         "maxReplicas": "5", "targetCPUUtilizationPercentage": "80"})["spec"]
    assert spec["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 5)


@pytest.mark.parametrize("name", list(HPA_BEHAVIORS))
def test_every_hpa_behavior_profile_sets_behavior_and_a_default_cpu_target(name: str) -> None:
    ref = {"apiVersion": "apps/v1", "kind": "Deployment"}
    cpu, behavior = HPA_BEHAVIORS[name]
    spec = build("hpa", {"scaleTargetRef": ref, "behavior": {"profile": name}})["spec"]
    assert spec["behavior"] == behavior
    assert spec["metrics"][0]["resource"]["target"]["averageUtilization"] == cpu
    declared = build("hpa", {"scaleTargetRef": ref, "targetCPUUtilizationPercentage": "55",
                             "behavior": {"profile": name}})["spec"]
    assert declared["metrics"][0]["resource"]["target"]["averageUtilization"] == 55


def test_explicit_hpa_behavior_rules_are_typed() -> None:
    spec = build("hpa", {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment"},
                         "behavior": {"scaleUp": {"stabilizationWindowSeconds": "0",
                                                  "selectPolicy": "max", "policies": [
                                                      {"type": "percent", "value": "100",
                                                       "periodSeconds": "15"}]}}})["spec"]
    assert spec["behavior"] == {"scaleUp": {"stabilizationWindowSeconds": 0,
                                            "selectPolicy": "Max", "policies": [
                                                {"type": "Percent", "value": 100,
                                                 "periodSeconds": 15}]}}


@pytest.mark.parametrize("name", list(PDB_BEHAVIORS))
def test_every_pdb_profile_sets_its_disruption_limit(name: str) -> None:
    low, high = PDB_BEHAVIORS[name]
    spec = build("pdb", {"behavior": {"profile": name}})["spec"]
    assert spec.get("minAvailable") == low and spec.get("maxUnavailable") == high


@pytest.mark.parametrize(("entry", "expected"), [
    ({"minAvailable": "1"}, {"minAvailable": 1}),
    ({"maxUnavailable": "50%"}, {"maxUnavailable": "50%"}),
    ({"minAvailable": "2", "maxUnavailable": "1"}, {"minAvailable": 2}),  # minAvailable wins
    ({}, {})])
def test_a_pdb_reads_numbers_and_percentages_and_min_available_wins(
        entry: dict, expected: dict) -> None:
    assert build("pdb", entry)["spec"] == {"selector": {}, **expected}


def test_a_pdb_selector_becomes_match_labels_and_empty_selects_every_pod() -> None:
    assert build("pdb", {"selector": {"app": "web"}})["spec"]["selector"] == {
        "matchLabels": {"app": "web"}}
    assert build("pdb", {})["spec"]["selector"] == {}


# --- custom ------------------------------------------------------------------------------


def test_a_custom_resource_takes_its_identity_from_the_metadata_block() -> None:
    body = build("custom", {
        "apiVersion": "db.example.com/v1", "kind": "Database",
        "metadata": {"name": "db1", "namespace": "data", "labels": {"tier": "db",
                                                                   "orkestra-owner": "x"},
                     "annotations": {"a": "1"}},
        "annotations": {"b": "2"}, "name": "ignored", "reconcile": True,
        "when": [{"field": "spec.x"}], "status": {"phase": "New"}, "hasStatus": True,
        "spec": {"size": "3", "ha": "true", "ratio": "0.5", "tags": "[\"a\"]", "name": "db",
                 "nested": [{"port": "5432"}]},
        "data": {"keep": "1"}})
    assert body == {
        "apiVersion": "db.example.com/v1", "kind": "Database",
        "metadata": {"name": "db1", "namespace": "data",
                     "labels": {"tier": "db", **LABELS}, "annotations": {"a": "1", "b": "2"}},
        "data": {"keep": "1"},
        "spec": {"size": 3, "ha": True, "ratio": 0.5, "tags": ["a"], "name": "db",
                 "nested": [{"port": 5432}]}}


def test_a_custom_resource_falls_back_to_the_engine_name_and_namespace() -> None:
    body = build("custom", {"apiVersion": "v1", "kind": "ConfigMap"}, name="cm")
    assert body["metadata"]["name"] == "cm" and body["metadata"]["namespace"] == "team-a"
    cluster = build("custom", {"apiVersion": "example.com/v1", "kind": "Thing",
                               "metadata": {"name": "t", "namespaced": "false"}})
    assert "namespace" not in cluster["metadata"]


# --- unknown fields -----------------------------------------------------------------------


def test_unknown_fields_reports_top_level_and_nested_keys_no_builder_reads() -> None:
    entry = {"name": "x", "image": "y", "replicaCount": 3,
             "autoscale": {"min": 1, "maxReplicas": 3, "scaleUp": {"step": 1}},
             "probes": {"liveness": {"path": "/", "intialDelaySeconds": 1}},
             "volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "nfs": {}}],
             "labels": {"anything": "goes"}, "envFrom": {"secretRef": [{"name": "s",
                                                                       "prefixx": "A"}]}}
    assert unknown_paths("deployments", entry) == [
        "replicaCount", "autoscale.maxReplicas", "autoscale.scaleUp.step",
        "probes.liveness.intialDelaySeconds", "volumes[1].nfs", "envFrom.secretRef[0].prefixx"]


def test_unknown_fields_reports_misspelled_security_fields() -> None:
    assert unknown_paths("pods", {"image": "x", "securityContext": {
        "runAsNonroot": True, "capabilities": {"drop": ["ALL"], "remove": []}},
        "podSecurity": {"fsGroup": 1, "fsgroup": 1}}) == [
        "securityContext.runAsNonroot", "securityContext.capabilities.remove",
        "podSecurity.fsgroup"]


def test_unknown_fields_accepts_the_common_and_copy_keys() -> None:
    common = {"name": "a", "namespace": "b", "labels": {}, "when": [], "or": [], "anyOf": [],
              "reconcile": True, "forEach": {}, "sleep": "1s", "forceConflict": True}
    assert unknown_paths("configMaps", {**common, "toNamespaces": [], "fromNamespace": "x",
                                         "fromConfigMap": "y", "data": {}}) == []
    assert unknown_paths("networkPolicies", {**common, "fromNetworkPolicy": "p"}) == []
    assert unknown_paths("resourceQuotas", {"fromResourceQuota": "q"}) == []
    assert unknown_paths("limitRanges", {"fromLimitRange": "l"}) == []
    assert unknown_paths("deployments", {"fromConfigMap": "y"}) == ["fromConfigMap"]
    assert unknown_paths("deployments", {"toNamespaces": ["a"]}) == []
    assert unknown_paths("clusterRoles", {"toNamespaces": ["a"]}) == ["toNamespaces"]


def test_unknown_fields_reports_a_namespace_on_a_cluster_scoped_kind() -> None:
    assert unknown_paths("clusterRoles", {"namespace": "x", "rules": []}) == ["namespace"]
    assert unknown_paths("namespaces", {"finalizers": [], "annotations": {}}) == [
        "annotations"]


def test_an_unknown_field_names_the_nearest_known_key_and_only_scope_keys_are_ignored(
        ) -> None:
    (typo,) = unknown_fields("deployments", {"image": "x", "replicass": 3})
    assert (typo.path, typo.nearest, typo.ignored) == ("replicass", "replicas", False)
    assert typo.message("deployments") == \
        "unknown field 'replicass' of a deployments entry (did you mean 'replicas'?)"
    (nested,) = unknown_fields("deployments", {"probes": {"liveness": {"pth": "/"}}})
    assert (nested.path, nested.nearest) == ("probes.liveness.pth", "path")
    (far,) = unknown_fields("deployments", {"zzzzzz": 1})
    assert far.nearest == "" and "did you mean" not in far.message("deployments")
    scope = unknown_fields("clusterRoles", {"namespace": "x", "toNamespaces": ["a"],
                                            "rulez": []})
    assert [(u.path, u.ignored) for u in scope] == [
        ("namespace", True), ("toNamespaces", True), ("rulez", False)]
    assert unknown_fields("deployments", {"namespace": "x"}) == []


def test_unknown_fields_lets_custom_entries_pass_anything_but_checks_metadata() -> None:
    assert unknown_paths("custom", {"apiVersion": "v1", "kind": "X", "data": {}, "rules": [],
                                     "metadata": {"name": "a", "namespaced": True,
                                                  "generateName": "b"}}) == [
        "metadata.generateName"]
    assert unknown_paths("secrets", {"whatever": 1}) == []
    with pytest.raises(KeyError):
        unknown_fields("daemonSets", {})


# --- every BuildError ----------------------------------------------------------------------

D = {"image": "nginx"}
HPA_REF = {"apiVersion": "apps/v1", "kind": "Deployment"}
BAD_INPUT = [
    # (sentence, kind key, entry, field, words the message contains)
    ("an image is required", "deployments", {}, "image", "required"),
    ("a map where a value is expected", "deployments", {"image": {"a": 1}}, "image",
     "single value"),
    ("the env map form", "deployments", {**D, "env": {"A": {"value": "1"}}}, "env", "v0.7.13"),
    ("an env entry without a name", "deployments", {**D, "env": [{"value": "1"}]},
     "env[0].name", "required"),
    ("an env list item that is not a map", "deployments", {**D, "env": ["A=1"]}, "env[0]",
     "map"),
    ("an env entry with value and valueFrom", "deployments",
     {**D, "env": [{"name": "A", "value": "1", "valueFrom": {"fieldRef": {
         "fieldPath": "x"}}}]}, "env[0]", "both"),
    ("a valueFrom without a source", "deployments",
     {**D, "env": [{"name": "A", "valueFrom": {}}]}, "env[0].valueFrom", "exactly one"),
    ("a secretKeyRef without a key", "deployments",
     {**D, "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s"}}}]},
     "env[0].valueFrom.secretKeyRef.key", "required"),
    ("a fieldRef without a path", "deployments",
     {**D, "env": [{"name": "A", "valueFrom": {"fieldRef": {}}}]},
     "env[0].valueFrom.fieldRef.fieldPath", "required"),
    ("a resourceFieldRef without a resource", "deployments",
     {**D, "env": [{"name": "A", "valueFrom": {"resourceFieldRef": {"divisor": "1"}}}]},
     "env[0].valueFrom.resourceFieldRef.resource", "required"),
    ("an optional flag that is not a boolean", "deployments",
     {**D, "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k",
                                                                "optional": "maybe"}}}]},
     "env[0].valueFrom.secretKeyRef.optional", "true or false"),
    ("an envFrom suffix without keys", "deployments",
     {**D, "envFrom": {"secretRef": [{"name": "s", "suffix": "_X"}]}},
     "envFrom.secretRef[0].suffix", "needs keys"),
    ("an envFrom list instead of a map", "deployments",
     {**D, "envFrom": [{"secretRef": {"name": "s"}}]}, "envFrom", "must be a map"),
    ("an envFrom ref without a name", "deployments",
     {**D, "envFrom": {"configMapRef": [{"prefix": "A"}]}}, "envFrom.configMapRef[0].name",
     "required"),
    ("an invalid memory limit", "deployments",
     {**D, "resources": {"limits": {"memory": "12XB"}}}, "resources.limits.memory", "12XB"),
    ("a negative cpu request", "deployments",
     {**D, "resources": {"requests": {"cpu": "-1"}}}, "resources.requests.cpu", "negative"),
    ("an unknown resources profile", "deployments", {**D, "resources": {"profile": "huge"}},
     "resources.profile", "tiny"),
    ("a resources profile with explicit values", "deployments",
     {**D, "resources": {"profile": "small", "limits": {"cpu": "1"}}}, "resources.profile",
     "limits"),
    ("an unknown probe type", "deployments",
     {**D, "probes": {"liveness": {"type": "udp", "port": "1"}}}, "probes.liveness.type",
     "http, tcp, exec, grpc"),
    ("a probe with neither type nor path", "deployments",
     {**D, "probes": {"liveness": {"port": "1"}}}, "probes.liveness.type", "required"),
    ("a probe profile with explicit timings", "deployments",
     {**D, "probes": {"liveness": {"path": "/", "port": "1", "profile": "fast",
                                   "periodSeconds": "3"}}}, "probes.liveness.profile",
     "periodSeconds"),
    ("an unknown probe profile", "deployments",
     {**D, "probes": {"liveness": {"path": "/", "port": "1", "profile": "turbo"}}},
     "probes.liveness.profile", "standard"),
    ("a liveness success threshold above 1", "deployments",
     {**D, "probes": {"liveness": {"path": "/", "port": "1", "successThreshold": "2"}}},
     "probes.liveness.successThreshold", "must be 1"),
    ("a probe timing that is not a number", "deployments",
     {**D, "probes": {"readiness": {"path": "/", "port": "1", "periodSeconds": "often"}}},
     "probes.readiness.periodSeconds", "whole number"),
    ("a probe period of zero", "deployments",
     {**D, "probes": {"readiness": {"path": "/", "port": "1", "periodSeconds": "0"}}},
     "probes.readiness.periodSeconds", "at least 1"),
    ("an exec probe without a command", "deployments",
     {**D, "probes": {"startup": {"type": "exec"}}}, "probes.startup.command", "required"),
    ("a probe without any port", "deployments",
     {**D, "probes": {"liveness": {"type": "tcp"}}}, "probes.liveness.port", "port"),
    ("a grpc probe on a named port", "deployments",
     {**D, "probes": {"liveness": {"type": "grpc", "port": "grpc"}}}, "probes.liveness.port",
     "port number"),
    ("a security profile with explicit fields", "deployments",
     {**D, "securityContext": {"profile": "restricted", "runAsUser": "1"}},
     "securityContext.profile", "runAsUser"),
    ("an unknown pod security profile", "deployments",
     {**D, "podSecurity": {"profile": "paranoid"}}, "podSecurity.profile", "baseline"),
    ("a security user id that is not a number", "deployments",
     {**D, "securityContext": {"runAsUser": "root"}}, "securityContext.runAsUser",
     "whole number"),
    ("a volume without a source", "deployments", {**D, "volumes": [{"name": "v"}]},
     "volumes[0]", "exactly one"),
    ("a volume with two sources", "deployments",
     {**D, "volumes": [{"name": "v", "emptyDir": {}, "hostPath": {"path": "/"}}]},
     "volumes[0]", "emptyDir, hostPath"),
    ("a volume declared twice", "deployments",
     {**D, "volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]},
     "volumes[1].name", "twice"),
    ("a configMap volume without a name", "deployments",
     {**D, "volumes": [{"name": "v", "configMap": {}}]}, "volumes[0].configMap.name",
     "required"),
    ("a claim volume without a claim name", "deployments",
     {**D, "volumes": [{"name": "v", "persistentVolumeClaim": {}}]},
     "volumes[0].persistentVolumeClaim.claimName", "required"),
    ("a hostPath volume without a path", "deployments",
     {**D, "volumes": [{"name": "v", "hostPath": {}}]}, "volumes[0].hostPath.path",
     "required"),
    ("an emptyDir on an unknown medium", "deployments",
     {**D, "volumes": [{"name": "v", "emptyDir": {"medium": "Disk"}}]},
     "volumes[0].emptyDir.medium", "Memory"),
    ("a file mode above 0777", "deployments",
     {**D, "volumes": [{"name": "v", "secret": {"name": "s", "defaultMode": "1000"}}]},
     "volumes[0].secret.defaultMode", "0777"),
    ("a mount of an undeclared volume", "deployments",
     {**D, "volumeMounts": [{"name": "ghost", "mountPath": "/g"}]}, "volumeMounts[0].name",
     "ghost"),
    ("a mount without a path", "deployments",
     {**D, "volumes": [{"name": "v", "emptyDir": {}}], "volumeMounts": [{"name": "v"}]},
     "volumeMounts[0].mountPath", "required"),
    ("an unknown protocol", "deployments", {**D, "protocol": "ICMP"}, "protocol", "TCP"),
    ("an empty image pull secret", "deployments", {**D, "imagePullSecrets": [""]},
     "imagePullSecrets[0]", "required"),
    ("a node selector that is a list", "deployments", {**D, "nodeSelector": ["a"]},
     "nodeSelector", "must be a map"),
    ("a command that is a string", "jobs", {**D, "command": "echo hi"}, "command",
     "must be a list"),
    ("an unknown rolling update profile", "deployments",
     {**D, "rollingUpdate": {"profile": "canary"}}, "rollingUpdate.profile", "blue-green"),
    ("a rolling update profile with explicit values", "deployments",
     {**D, "rollingUpdate": {"profile": "safe", "maxSurge": "2"}}, "rollingUpdate.profile",
     "maxSurge"),
    ("a rolling update that can never progress", "deployments",
     {**D, "rollingUpdate": {"maxSurge": "0", "maxUnavailable": "0%"}}, "rollingUpdate",
     "both be 0"),
    ("a rolling update value that is neither number nor percentage", "deployments",
     {**D, "rollingUpdate": {"maxSurge": "half"}}, "rollingUpdate.maxSurge", "percentage"),
    ("a StatefulSet surge", "statefulSets", {**D, "rollingUpdate": {"maxSurge": "1"}},
     "rollingUpdate.maxSurge", "StatefulSet"),
    ("a StatefulSet maxUnavailable of 0", "statefulSets",
     {**D, "rollingUpdate": {"maxUnavailable": "0"}}, "rollingUpdate.maxUnavailable",
     "at least 1"),
    ("a claim template without a size", "statefulSets",
     {**D, "volumeClaimTemplates": [{"name": "d"}]}, "volumeClaimTemplates[0].storageSize",
     "required"),
    ("a claim template declared twice", "statefulSets",
     {**D, "volumeClaimTemplates": [{"storageSize": "1Gi"}, {"storageSize": "2Gi"}]},
     "volumeClaimTemplates[1].name", "twice"),
    ("an unknown access mode", "statefulSets",
     {**D, "volumeClaimTemplates": [{"storageSize": "1Gi", "accessModes": ["RWO"]}]},
     "volumeClaimTemplates[0].accessModes[0]", "ReadWriteOnce"),
    ("a negative backoff limit", "jobs", {**D, "backoffLimit": -1}, "backoffLimit",
     "at least 0"),
    ("a cron job without a schedule", "cronJobs", D, "schedule", "cron expression"),
    ("an unknown concurrency policy", "cronJobs",
     {**D, "schedule": "@daily", "concurrencyPolicy": "queue"}, "concurrencyPolicy",
     "Allow, Forbid, Replace"),
    ("a history limit that is not a number", "cronJobs",
     {**D, "schedule": "@daily", "successfulJobsHistoryLimit": "many"},
     "successfulJobsHistoryLimit", "many"),
    ("a suspend flag that is not a boolean", "cronJobs",
     {**D, "schedule": "@daily", "suspend": "ture"}, "suspend", "true or false"),
    ("a negative starting deadline", "cronJobs",
     {**D, "schedule": "@daily", "startingDeadlineSeconds": "-5"}, "startingDeadlineSeconds",
     "at least 0"),
    ("a service without a port", "services", {}, "port", "above 0"),
    ("an unknown service type", "services", {"port": "80", "type": "ExternalName"}, "type",
     "ClusterIP"),
    ("a headless NodePort service", "services",
     {"port": "80", "type": "NodePort", "headless": "true"}, "headless", "ClusterIP"),
    ("a node port on a ClusterIP service", "services", {"port": "80", "nodePort": "30000"},
     "nodePort", "NodePort"),
    ("an invalid target port name", "services", {"port": "80", "targetPort": "Not_A_Name"},
     "targetPort", "port name"),
    ("an ingress without a service port", "ingresses", {"serviceName": "s"}, "servicePort",
     "required"),
    ("an ingress without a service name", "ingresses", {"servicePort": "80"}, "serviceName",
     "required"),
    ("an ingress service port out of range", "ingresses",
     {"serviceName": "s", "servicePort": "0"}, "servicePort", "between 1 and 65535"),
    ("an unknown path type", "ingresses",
     {"serviceName": "s", "servicePort": "80", "pathType": "Regex"}, "pathType", "Prefix"),
    ("a tls.create that is not a boolean", "ingresses",
     {"serviceName": "s", "servicePort": "80", "tls": {"create": "sure"}}, "tls.create",
     "true or false"),
    ("a network policy profile with explicit rules", "networkPolicies",
     {"profile": "deny-all", "egress": [{}]}, "profile", "egress"),
    ("an unknown network policy profile", "networkPolicies", {"profile": "allow-all"},
     "profile", "deny-all"),
    ("an unknown policy type", "networkPolicies", {"policyTypes": ["Both"]},
     "policyTypes[0]", "Ingress, Egress"),
    ("an ipBlock without a cidr", "networkPolicies",
     {"ingress": [{"from": [{"ipBlock": {}}]}]}, "ingress[0].from[0].ipBlock.cidr",
     "required"),
    ("an ipBlock combined with a selector", "networkPolicies",
     {"egress": [{"to": [{"podSelector": {}, "ipBlock": {"cidr": "1.2.3.4/32"}}]}]},
     "egress[0].to[0].ipBlock", "separate peer"),
    ("a network policy port out of range", "networkPolicies",
     {"ingress": [{"ports": [{"port": "70000"}]}]}, "ingress[0].ports[0].port", "65535"),
    ("an endPort with a named port", "networkPolicies",
     {"ingress": [{"ports": [{"port": "http", "endPort": "90"}]}]},
     "ingress[0].ports[0].endPort", "numeric"),
    ("a LabelSelector where flat labels are expected", "networkPolicies",
     {"podSelector": {"matchLabels": {"app": "x"}}}, "podSelector.matchLabels", "flat map"),
    ("an empty finalizer", "namespaces", {"finalizers": [""]}, "finalizers[0]", "empty"),
    ("a quota profile with explicit limits", "resourceQuotas",
     {"profile": "small", "hard": {"pods": "1"}}, "profile", "hard"),
    ("an unknown quota profile", "resourceQuotas", {"profile": "tiny"}, "profile", "xlarge"),
    ("an invalid quota value", "resourceQuotas", {"hard": {"pods": "ten"}}, "hard.pods",
     "ten"),
    ("a limit range item without a type", "limitRanges", {"limits": [{"max": {"cpu": "1"}}]},
     "limits[0].type", "Container, Pod, PersistentVolumeClaim"),
    ("an invalid limit range quantity", "limitRanges",
     {"limits": [{"type": "Pod", "max": {"memory": "1 GB"}}]}, "limits[0].max.memory",
     "1 GB"),
    ("a limit range profile with explicit limits", "limitRanges",
     {"profile": "small", "limits": [{"type": "Pod"}]}, "profile", "limits"),
    ("an automount flag that is not a boolean", "serviceAccounts",
     {"automountServiceAccountToken": "sometimes"}, "automountServiceAccountToken",
     "true or false"),
    ("a role without rules", "roles", {}, "rules", "at least one rule"),
    ("a rule without verbs", "clusterRoles", {"rules": [{"apiGroups": [""],
                                                         "resources": ["pods"]}]},
     "rules[0].verbs", "required"),
    ("a rule naming resources without api groups", "roles",
     {"rules": [{"resources": ["pods"], "verbs": ["get"]}]}, "rules[0].apiGroups",
     "core group"),
    ("a binding without a role name", "roleBindings", {"subjects": [{"name": "a"}]},
     "roleRef.name", "required"),
    ("a cluster role binding to a Role", "clusterRoleBindings",
     {"roleRef": {"name": "r", "kind": "Role"}, "subjects": [{"name": "a"}]}, "roleRef.kind",
     "ClusterRole"),
    ("a binding without subjects", "roleBindings", {"roleRef": {"name": "r"}}, "subjects",
     "at least one"),
    ("an unknown subject kind", "roleBindings",
     {"roleRef": {"name": "r"}, "subjects": [{"kind": "Robot", "name": "a"}]},
     "subjects[0].kind", "ServiceAccount, User, Group"),
    ("a subject without a name", "roleBindings",
     {"roleRef": {"name": "r"}, "subjects": [{"kind": "User"}]}, "subjects[0].name",
     "required"),
    ("a claim without a size", "persistentVolumeClaims", {}, "storage", "required"),
    ("an unknown volume mode", "persistentVolumeClaims", {"storage": "1Gi",
                                                          "volumeMode": "Raw"},
     "volumeMode", "Filesystem, Block"),
    ("a volume without capacity", "persistentVolumes", {"hostPath": "/x"}, "capacity",
     "required"),
    ("a volume without a source", "persistentVolumes", {"capacity": "1Gi"}, "hostPath",
     "needs a source"),
    ("a volume with two sources", "persistentVolumes",
     {"capacity": "1Gi", "hostPath": "/x", "csiDriver": "d", "csiVolumeHandle": "h"},
     "hostPath", "one source"),
    ("a CSI driver without a volume handle", "persistentVolumes",
     {"capacity": "1Gi", "csiDriver": "d"}, "csiVolumeHandle", "required"),
    ("an unknown reclaim policy", "persistentVolumes",
     {"capacity": "1Gi", "hostPath": "/x", "reclaimPolicy": "Keep"}, "reclaimPolicy",
     "Retain, Delete, Recycle"),
    ("an HPA without a target apiVersion", "hpa", {"scaleTargetRef": {"kind": "Deployment"}},
     "scaleTargetRef.apiVersion", "required"),
    ("an HPA without a target kind", "hpa", {"scaleTargetRef": {"apiVersion": "apps/v1"}},
     "scaleTargetRef.kind", "required"),
    ("an HPA maximum below its minimum", "hpa",
     {"scaleTargetRef": HPA_REF, "minReplicas": "3", "maxReplicas": "2"}, "maxReplicas",
     "minReplicas (3)"),
    ("an HPA minimum of 0", "hpa", {"scaleTargetRef": HPA_REF, "minReplicas": "0"},
     "minReplicas", "at least 1"),
    ("an HPA maximum that is not a number", "hpa",
     {"scaleTargetRef": HPA_REF, "maxReplicas": "lots"}, "maxReplicas", "whole number"),
    ("an HPA cpu target of 0", "hpa",
     {"scaleTargetRef": HPA_REF, "targetCPUUtilizationPercentage": "0"},
     "targetCPUUtilizationPercentage", "at least 1"),
    ("an HPA behavior profile with explicit rules", "hpa",
     {"scaleTargetRef": HPA_REF, "behavior": {"profile": "web", "scaleUp": {
         "selectPolicy": "Max"}}}, "behavior.profile", "scaleUp"),
    ("an unknown HPA behavior profile", "hpa",
     {"scaleTargetRef": HPA_REF, "behavior": {"profile": "spiky"}}, "behavior.profile",
     "cost-optimized"),
    ("an unknown HPA select policy", "hpa",
     {"scaleTargetRef": HPA_REF, "behavior": {"scaleDown": {"selectPolicy": "Avg"}}},
     "behavior.scaleDown.selectPolicy", "Max, Min, Disabled"),
    ("an HPA scaling policy without a value", "hpa",
     {"scaleTargetRef": HPA_REF, "behavior": {"scaleUp": {"policies": [
         {"type": "Pods", "periodSeconds": "15"}]}}}, "behavior.scaleUp.policies[0].value",
     "required"),
    ("a PDB profile with explicit values", "pdb",
     {"behavior": {"profile": "rolling"}, "minAvailable": "1"}, "behavior.profile",
     "minAvailable"),
    ("an unknown PDB profile", "pdb", {"behavior": {"profile": "strict"}}, "behavior.profile",
     "zero-downtime"),
    ("a PDB value that is neither number nor percentage", "pdb", {"minAvailable": "most"},
     "minAvailable", "percentage"),
    ("a PDB selector with a nested map", "pdb", {"selector": {"app": {"in": ["a"]}}},
     "selector.app", "flat map"),
    ("config map data with a nested map", "configMaps", {"data": {"a": {"b": "c"}}},
     "data.a", "single value"),
    ("a custom resource without apiVersion", "custom", {"kind": "X"}, "apiVersion",
     "required"),
    ("a custom resource without kind", "custom", {"apiVersion": "v1"}, "kind", "required"),
    ("an invalid custom resource name", "custom",
     {"apiVersion": "v1", "kind": "X", "metadata": {"name": "Not_Valid"}}, "metadata.name",
     "Not_Valid"),
    ("a namespace on a cluster-scoped custom resource", "custom",
     {"apiVersion": "v1", "kind": "X", "metadata": {"namespaced": False, "namespace": "a"}},
     "metadata.namespace", "namespaced is false"),
    ("an invalid custom resource label", "custom",
     {"apiVersion": "v1", "kind": "X", "metadata": {"labels": {"a": "has space"}}},
     "metadata.labels.a", "has space"),
    ("custom spec that is not a map", "custom", {"apiVersion": "v1", "kind": "X",
                                                 "spec": ["a"]}, "spec", "must be a map"),
]


@pytest.mark.parametrize(("key", "entry", "field", "words"),
                         [case[1:] for case in BAD_INPUT], ids=[case[0] for case in BAD_INPUT])
def test_bad_input_is_a_build_error_naming_the_field_and_what_was_expected(
        key: str, entry: dict, field: str, words: str) -> None:
    err = error(key, copy.deepcopy(entry))
    assert err.field == field
    assert words in str(err)


def test_a_cluster_role_binding_subject_needs_a_namespace_when_the_cr_has_none() -> None:
    err = error("clusterRoleBindings", {"roleRef": {"name": "view"},
                                        "subjects": [{"name": "sa"}]}, cr_namespace="")
    assert err.field == "subjects[0].namespace"


def test_the_env_map_form_is_refused_naming_the_list_form_orkestra_reads() -> None:
    err = error("deployments", {"image": "nginx", "env": {"MODE": "prod"}})
    assert err.field == "env"
    assert "the form Orkestra reads since v0.7.13" in str(err)
    assert 'env: [{name: KEY, value: "..."}]' in str(err)

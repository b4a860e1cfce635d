"""The keys each kind's entry accepts, and `unknown_fields` to report the others. Pure data.

`unknown_fields(kind_key, entry)` returns the keys no builder (nor the engine) reads —
`replicaCount`, `probes.liveness.intialDelaySeconds`, `volumes[1].nfs` — each with its
entry-relative path, the nearest accepted key (difflib) and whether it is merely ignored
(`namespace` and `toNamespaces` on a cluster-scoped kind: Orkestra's common keys, which
mean nothing there, docs/differences.md W8) rather than an error (docs/differences.md T7).
`unknown_paths` gives the paths alone. It descends into the structured blocks (probes,
resources, volumes, rules, tls, ...) but not into free-form maps (labels, annotations,
selectors, data, hard, requests/limits, custom `spec`) nor into the values of
securityContext/podSecurity fields, which pass through to the API server. A value of the
wrong shape is not reported here: the builder raises BuildError for it.

Accepted everywhere: the common keys name, labels, when, or, anyOf, reconcile, forEach,
sleep, forceConflict; `namespace` and `toNamespaces` only for namespaced kinds (they mean
nothing on a cluster-scoped one; orksync copies every namespaced kind, Orkestra only
Secrets, ConfigMaps, NetworkPolicies, ResourceQuotas and LimitRanges); `fromNamespace` and
`from<Kind>` on the copyable kinds; `autoscale` on workloads (orksync.lifecycle.autoscale).
`secrets` entries are validated by the Secret builder: no schema here.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from orksync.render.builders.common import sub
from orksync.runtime.memo import IdentityCache


@dataclass(frozen=True, slots=True)
class ListOf:
    """A list whose items follow `item`."""

    item: Schema


Schema = Union[Mapping[str, "Schema"], ListOf, None]  # noqa: UP007 (recursive alias)
ANY: Schema = None  # any value, not inspected

COMMON: dict[str, Schema] = dict.fromkeys(
    ("name", "labels", "when", "or", "anyOf", "reconcile", "forEach", "sleep", "forceConflict"),
    ANY)
NAMESPACED = {**COMMON, "namespace": ANY, "toNamespaces": ANY}


def _keys(*names: str) -> dict[str, Schema]:
    return dict.fromkeys(names, ANY)


def _copyable(source_key: str) -> dict[str, Schema]:
    return _keys("fromNamespace", source_key)


_PROBE = _keys("type", "path", "port", "command", "service", "profile", "initialDelaySeconds",
               "periodSeconds", "failureThreshold", "successThreshold", "timeoutSeconds")
_KEY_REF = _keys("name", "key", "optional")
_ENV_REF = _keys("name", "prefix", "suffix", "optional", "keys")
_NAMED_SOURCE = _keys("name", "optional", "defaultMode", "items")
# Kubernetes' SecurityContext / PodSecurityContext fields (passed through) plus `profile`.
_CONTAINER_SECURITY = _keys(
    "profile", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "runAsNonRoot",
    "runAsUser", "runAsGroup", "privileged", "capabilities", "seccompProfile",
    "seLinuxOptions", "appArmorProfile", "windowsOptions", "procMount")
_POD_SECURITY = _keys(
    "profile", "runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup", "fsGroupChangePolicy",
    "supplementalGroups", "supplementalGroupsPolicy", "sysctls", "seccompProfile",
    "seLinuxOptions", "seLinuxChangePolicy", "appArmorProfile", "windowsOptions")
POD: dict[str, Schema] = {
    **_keys("image", "port", "protocol", "command", "args", "workingDirectory",
            "serviceAccountName", "imagePullSecrets", "nodeSelector"),
    "securityContext": {**_CONTAINER_SECURITY, "capabilities": _keys("add", "drop")},
    "podSecurity": _POD_SECURITY,
    "env": ListOf({**_keys("name", "value"), "valueFrom": {
        "secretKeyRef": _KEY_REF, "configMapKeyRef": _KEY_REF,
        "fieldRef": _keys("fieldPath", "apiVersion"),
        "resourceFieldRef": _keys("resource", "containerName", "divisor")}}),
    "envFrom": {"secretRef": ListOf(_ENV_REF), "configMapRef": ListOf(_ENV_REF)},
    "resources": _keys("profile", "requests", "limits"),
    "probes": {"startup": _PROBE, "liveness": _PROBE, "readiness": _PROBE},
    "volumes": ListOf({"name": ANY, "configMap": _NAMED_SOURCE,
                       "secret": {**_NAMED_SOURCE, "secretName": ANY},
                       "emptyDir": _keys("medium", "sizeLimit"),
                       "persistentVolumeClaim": _keys("claimName", "readOnly"),
                       "hostPath": _keys("path", "type")}),
    "volumeMounts": ListOf(_keys("name", "mountPath", "subPath", "readOnly")),
}
_ROLLING = _keys("profile", "maxSurge", "maxUnavailable")
_RULES = ListOf(_keys("apiGroups", "resources", "verbs", "resourceNames"))
_BINDING: dict[str, Schema] = {"roleRef": _keys("name", "kind"),
                               "subjects": ListOf(_keys("kind", "name", "namespace"))}
_PEER: dict[str, Schema] = {"podSelector": ANY, "namespaceSelector": ANY,
                            "ipBlock": _keys("cidr", "except")}
_PORTS = ListOf(_keys("protocol", "port", "endPort"))
_CONDITIONS = _keys("when", "or", "anyOf")
_AUTOSCALE: dict[str, Schema] = {
    **_keys("min", "max", "cooldown"),
    "scaleUp": {"conditions": _CONDITIONS, **_keys("target", "increment")},
    "scaleDown": {"conditions": _CONDITIONS, **_keys("target", "decrement")}}
_SCALING: dict[str, Schema] = {**_keys("stabilizationWindowSeconds", "selectPolicy"),
            "policies": ListOf(_keys("type", "value", "periodSeconds"))}

ACCEPTED: dict[str, dict[str, Schema]] = {
    "namespaces": {**COMMON, **_keys("finalizers")},
    "configMaps": {**NAMESPACED, **_keys("data"), **_copyable("fromConfigMap")},
    "networkPolicies": {
        **NAMESPACED, **_copyable("fromNetworkPolicy"), **_keys("podSelector", "policyTypes",
                                                                "profile"),
        "ingress": ListOf({"from": ListOf(_PEER), "ports": _PORTS}),
        "egress": ListOf({"to": ListOf(_PEER), "ports": _PORTS})},
    "resourceQuotas": {**NAMESPACED, **_copyable("fromResourceQuota"), **_keys("hard",
                                                                               "profile")},
    "limitRanges": {**NAMESPACED, **_copyable("fromLimitRange"), "profile": ANY,
                    "limits": ListOf(_keys("type", "max", "min", "default", "defaultRequest",
                                           "maxLimitRequestRatio"))},
    "clusterRoles": {**COMMON, "rules": _RULES},
    "clusterRoleBindings": {**COMMON, **_BINDING},
    "serviceAccounts": {**NAMESPACED, **_keys("imagePullSecrets",
                                              "automountServiceAccountToken")},
    "roles": {**NAMESPACED, "rules": _RULES},
    "roleBindings": {**NAMESPACED, **_BINDING},
    "custom": {},  # every top-level key is accepted (passed through); see unknown_fields
    "replicaSets": {**NAMESPACED, **POD, **_keys("replicas", "annotations"),
                    "autoscale": _AUTOSCALE},
    "deployments": {**NAMESPACED, **POD, **_keys("replicas", "annotations"),
                    "rollingUpdate": _ROLLING, "autoscale": _AUTOSCALE},
    "services": {**NAMESPACED, **_keys("type", "headless", "protocol", "port", "targetPort",
                                       "nodePort", "selector")},
    "jobs": {**NAMESPACED, **POD, **_keys("backoffLimit")},
    "cronJobs": {**NAMESPACED, **POD, **_keys(
        "schedule", "suspend", "successfulJobsHistoryLimit", "failedJobsHistoryLimit",
        "concurrencyPolicy", "startingDeadlineSeconds")},
    "statefulSets": {**NAMESPACED, **POD, **_keys("replicas", "annotations", "tag",
                                                  "serviceName"),
                     "rollingUpdate": _ROLLING, "autoscale": _AUTOSCALE,
                     "volumeClaimTemplates": ListOf(_keys("name", "storageClass",
                                                          "storageSize", "mountPath",
                                                          "accessModes"))},
    "persistentVolumes": {**COMMON, **_keys("storageClassName", "capacity", "accessModes",
                                            "reclaimPolicy", "hostPath", "csiDriver",
                                            "csiVolumeHandle")},
    "persistentVolumeClaims": {**NAMESPACED, **_keys("storageClassName", "accessModes",
                                                     "storage", "volumeMode", "volumeName")},
    "ingresses": {**NAMESPACED, **_keys("host", "serviceName", "servicePort", "path",
                                        "pathType", "className", "annotations"),
                  "tls": _keys("create", "secretName", "hosts", "validFor")},
    "hpa": {**NAMESPACED, **_keys("minReplicas", "maxReplicas",
                                  "targetCPUUtilizationPercentage"),
            "scaleTargetRef": _keys("apiVersion", "kind", "name"),
            "behavior": {"profile": ANY, "scaleUp": _SCALING, "scaleDown": _SCALING}},
    "pdb": {**NAMESPACED, **_keys("selector", "minAvailable", "maxUnavailable"),
            "behavior": _keys("profile")},
    "pods": {**NAMESPACED, **POD, **_keys("annotations")},
}
_CUSTOM_METADATA = _keys("name", "namespace", "namespaced", "labels", "annotations")
# Orkestra's common keys of a namespaced entry: on a cluster-scoped kind they mean nothing,
# and are ignored with a warning rather than refused
_IGNORED_ON_CLUSTER_SCOPED = frozenset({"namespace", "toNamespaces"})


@dataclass(frozen=True, slots=True)
class UnknownField:
    """A key of an entry that no builder reads."""

    path: str  # entry-relative: `probes.liveness.intialDelaySeconds`
    key: str  # its last step: `intialDelaySeconds`
    nearest: str  # the closest accepted key at that place ("" when none is close)
    ignored: bool  # a key with no meaning here (warned), not a mistake (an error)

    def message(self, kind_key: str) -> str:
        """`unknown field 'replicass' of a deployments entry (did you mean 'replicas'?)`;
        for an ignored key, why it is ignored (said after its path)."""
        if self.ignored:
            return f"is ignored: {kind_key} objects are cluster-scoped"
        hint = f" (did you mean {self.nearest!r}?)" if self.nearest else ""
        return f"unknown field {self.key!r} of a {kind_key} entry{hint}"


def unknown_fields(kind_key: str, entry: Mapping[str, Any]) -> list[UnknownField]:
    """The keys that no builder reads, in entry order (asked for every custom resource
    of a Katalog entry: worked out once per entry)."""
    return list(_UNKNOWN.get(entry, kind_key, lambda: tuple(_unknown_fields(kind_key, entry))))


def unknown_paths(kind_key: str, entry: Mapping[str, Any]) -> list[str]:
    """Entry-relative paths of the keys that no builder reads, in entry order."""
    return [u.path for u in unknown_fields(kind_key, entry)]


_UNKNOWN: IdentityCache[tuple[UnknownField, ...]] = IdentityCache()


def _unknown_fields(kind_key: str, entry: Mapping[str, Any]) -> list[UnknownField]:
    if kind_key == "secrets":
        return []
    if kind_key == "custom":
        meta = entry.get("metadata")
        return _walk(meta, _CUSTOM_METADATA, "metadata") if isinstance(meta, Mapping) else []
    schema = ACCEPTED.get(kind_key)
    if schema is None:
        raise KeyError(f"no field list for kind key {kind_key!r}")
    found = _walk(entry, schema, "")
    if "namespace" in schema:
        return found
    return [UnknownField(u.path, u.key, u.nearest, True)
            if u.path in _IGNORED_ON_CLUSTER_SCOPED else u for u in found]


def _walk(value: Any, schema: Schema, path: str) -> list[UnknownField]:
    if schema is None:
        return []
    if isinstance(schema, ListOf):
        if not isinstance(value, list):
            return []
        return [p for i, v in enumerate(value) for p in _walk(v, schema.item, sub(path, i))]
    if not isinstance(value, Mapping):
        return []
    found = []
    for key, child in value.items():
        key = str(key)
        if key not in schema:
            nearest = difflib.get_close_matches(key, list(schema), n=1)
            found.append(UnknownField(sub(path, key), key, nearest[0] if nearest else "",
                                      False))
        else:
            found.extend(_walk(child, schema[key], sub(path, key)))
    return found

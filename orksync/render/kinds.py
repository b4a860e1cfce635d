"""The registry of template keys (`deployments`, `hpa`, ...): which kind each produces, its
scope, default name, Orkestra's group order and its builder. Pure data."""

from __future__ import annotations

from dataclasses import dataclass

from orksync.render.builders import Builder
from orksync.render.builders.availability import build_hpa, build_pdb
from orksync.render.builders.batch import build_cron_job, build_job
from orksync.render.builders.config import build_config_map, build_custom
from orksync.render.builders.fields import UnknownField, unknown_fields
from orksync.render.builders.network import (
    build_ingress,
    build_network_policy,
    build_service,
)
from orksync.render.builders.rbac import (
    build_cluster_role,
    build_cluster_role_binding,
    build_role,
    build_role_binding,
    build_service_account,
)
from orksync.render.builders.secret import build_secret
from orksync.render.builders.storage import (
    build_persistent_volume,
    build_persistent_volume_claim,
)
from orksync.render.builders.tenancy import (
    build_limit_range,
    build_namespace,
    build_resource_quota,
)
from orksync.render.builders.workloads import (
    build_deployment,
    build_pod,
    build_replica_set,
    build_stateful_set,
)

__all__ = ["BLOCK_CONTROL_KEYS", "BY_KEY", "KINDS", "ORDER", "PLACEHOLDER_KEYS", "KindSpec",
           "UnknownField", "unknown_fields"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KindSpec:
    key: str  # the HookTemplates key
    api_version: str
    kind: str
    namespaced: bool
    default_suffix: str | None  # default name = <cr><suffix>; None: a name is required
    builder: Builder | None  # None: not supported yet (a clear error, never a silent skip)

    def default_name(self, cr_name: str) -> str:
        return "" if self.default_suffix is None else cr_name + self.default_suffix


def _k(key: str, api: str, kind: str, namespaced: bool, suffix: str | None,
       builder: Builder | None = None) -> KindSpec:
    return KindSpec(key=key, api_version=api, kind=kind, namespaced=namespaced,
                    default_suffix=suffix, builder=builder)


# Orkestra's group order inside one block (semantics §2.3).
KINDS: tuple[KindSpec, ...] = (
    _k("namespaces", "v1", "Namespace", False, "-ns", build_namespace),
    _k("secrets", "v1", "Secret", True, "-secret", build_secret),
    _k("configMaps", "v1", "ConfigMap", True, "-config", build_config_map),
    _k("networkPolicies", "networking.k8s.io/v1", "NetworkPolicy", True, None,
       build_network_policy),
    _k("resourceQuotas", "v1", "ResourceQuota", True, None, build_resource_quota),
    _k("limitRanges", "v1", "LimitRange", True, None, build_limit_range),
    _k("clusterRoles", "rbac.authorization.k8s.io/v1", "ClusterRole", False, "-cluster-role",
       build_cluster_role),
    _k("clusterRoleBindings", "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", False,
       "-crb", build_cluster_role_binding),
    _k("serviceAccounts", "v1", "ServiceAccount", True, "-sa", build_service_account),
    _k("roles", "rbac.authorization.k8s.io/v1", "Role", True, "-role", build_role),
    _k("roleBindings", "rbac.authorization.k8s.io/v1", "RoleBinding", True, "-rolebinding",
       build_role_binding),
    # custom: apiVersion/kind come from the built body; name/namespace/scope from the
    # entry's metadata block (see builders.config).
    _k("custom", "", "", True, None, build_custom),
    _k("replicaSets", "apps/v1", "ReplicaSet", True, "-replicaset", build_replica_set),
    _k("deployments", "apps/v1", "Deployment", True, "-deployment", build_deployment),
    _k("services", "v1", "Service", True, "-svc", build_service),
    _k("jobs", "batch/v1", "Job", True, "-job", build_job),
    _k("cronJobs", "batch/v1", "CronJob", True, "-cronjob", build_cron_job),
    _k("statefulSets", "apps/v1", "StatefulSet", True, "", build_stateful_set),
    _k("persistentVolumes", "v1", "PersistentVolume", False, None, build_persistent_volume),
    _k("persistentVolumeClaims", "v1", "PersistentVolumeClaim", True, None,
       build_persistent_volume_claim),
    _k("ingresses", "networking.k8s.io/v1", "Ingress", True, "-ingress", build_ingress),
    _k("hpa", "autoscaling/v2", "HorizontalPodAutoscaler", True, "-hpa", build_hpa),
    _k("pdb", "policy/v1", "PodDisruptionBudget", True, "-pdb", build_pdb),
    _k("pods", "v1", "Pod", True, "-pod", build_pod),
)

BY_KEY = {k.key: k for k in KINDS}
ORDER = {k.key: i for i, k in enumerate(KINDS)}

# Keys of a HookTemplates block that are not resource lists.
BLOCK_CONTROL_KEYS = frozenset({"when", "or", "anyOf", "ordered", "name", "groups", "timeout",
                                "external"})
# Keys Orkestra declares but never implemented: accepted, reported, never silently dropped.
PLACEHOLDER_KEYS = frozenset({
    "volumes", "volumeMounts", "serviceMonitors", "podSecurityPolicies", "priorityClasses",
    "runtimeClasses", "priorityLevelConfigurations", "podTemplates", "daemonSets",
    "storageClasses", "storageLocations", "storagePools", "storageBackups", "storageSnapshots",
    "storageVolumes",
})

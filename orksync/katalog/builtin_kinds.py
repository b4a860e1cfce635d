"""Orkestra's table of built-in kinds: an entry's `apiTypes: {kind: Namespace}` names a
Kubernetes kind, and Orkestra fills its group, version and plural from this table.
Pure data."""

from __future__ import annotations

# kind -> (group, version, plural)
BUILTIN_KINDS: dict[str, tuple[str, str, str]] = {
    "Namespace": ("", "v1", "namespaces"),
    "ConfigMap": ("", "v1", "configmaps"),
    "Secret": ("", "v1", "secrets"),
    "Service": ("", "v1", "services"),
    "ServiceAccount": ("", "v1", "serviceaccounts"),
    "Pod": ("", "v1", "pods"),
    "PersistentVolumeClaim": ("", "v1", "persistentvolumeclaims"),
    "PersistentVolume": ("", "v1", "persistentvolumes"),
    "Node": ("", "v1", "nodes"),
    "Endpoints": ("", "v1", "endpoints"),
    "Event": ("", "v1", "events"),
    "LimitRange": ("", "v1", "limitranges"),
    "ResourceQuota": ("", "v1", "resourcequotas"),
    "Deployment": ("apps", "v1", "deployments"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "DaemonSet": ("apps", "v1", "daemonsets"),
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "Job": ("batch", "v1", "jobs"),
    "CronJob": ("batch", "v1", "cronjobs"),
    "Ingress": ("networking.k8s.io", "v1", "ingresses"),
    "NetworkPolicy": ("networking.k8s.io", "v1", "networkpolicies"),
    "Role": ("rbac.authorization.k8s.io", "v1", "roles"),
    "RoleBinding": ("rbac.authorization.k8s.io", "v1", "rolebindings"),
    "ClusterRole": ("rbac.authorization.k8s.io", "v1", "clusterroles"),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
    "HorizontalPodAutoscaler": ("autoscaling", "v2", "horizontalpodautoscalers"),
    "PodDisruptionBudget": ("policy", "v1", "poddisruptionbudgets"),
    "StorageClass": ("storage.k8s.io", "v1", "storageclasses"),
}
# the built-in kinds that are cluster-scoped
CLUSTER_SCOPED = frozenset({"Namespace", "Node", "PersistentVolume", "ClusterRole",
                            "ClusterRoleBinding", "StorageClass"})

"""Every built-in profile a builder expands, in one place. Pure data.

Values are Orkestra's built-ins (pkg/profiles, as documented in its profile reference)
unless marked "orksync": Orkestra has no built-in LimitRange profiles (that class is
user-defined only) and no `slow` probe profile. Names match case-insensitively. A profile
and the explicit fields it expands to are mutually exclusive (Orkestra's load-time rule;
here a BuildError). A Katalog's own `profiles:` are put in place before a builder runs
(orksync.render.user_profiles): a builder sees their fields, never their names.

| Class (field) | Profiles |
|---|---|
| `resources.profile` | tiny small medium large burst steady compute-heavy memory-heavy |
| `probes.*.profile` | fast standard (default) patient slow-start, slow (orksync: = patient) |
| `securityContext.profile` / `podSecurity.profile` | baseline restricted hardened |
| `rollingUpdate.profile` | safe fast blue-green |
| NetworkPolicy `profile` | deny-all deny-all-ingress deny-all-egress allow-same-namespace |
| | allow-dns-egress |
| ResourceQuota `profile` | small medium large xlarge |
| LimitRange `profile` (orksync) | small medium large xlarge |
| HPA `behavior.profile` | web api latency-sensitive batch cost-optimized |
| PDB `behavior.profile` | zero-downtime rolling relaxed |
"""

from __future__ import annotations

from typing import Any


def _res(cpu_req: str, cpu_lim: str, mem_req: str, mem_lim: str) -> dict[str, Any]:
    return {"requests": {"cpu": cpu_req, "memory": mem_req},
            "limits": {"cpu": cpu_lim, "memory": mem_lim}}


# Container resources: requests and limits (canonical quantities).
RESOURCES: dict[str, dict[str, Any]] = {
    "tiny": _res("25m", "100m", "64Mi", "128Mi"),
    "small": _res("100m", "500m", "128Mi", "512Mi"),
    "medium": _res("250m", "1", "256Mi", "1Gi"),
    "large": _res("500m", "2", "512Mi", "2Gi"),
    "burst": _res("200m", "2", "256Mi", "2Gi"),
    "steady": _res("300m", "600m", "256Mi", "512Mi"),
    "compute-heavy": _res("1", "2", "512Mi", "1Gi"),
    "memory-heavy": _res("250m", "500m", "1Gi", "2Gi"),
}


def _probe(delay: int, period: int, failures: int, timeout: int) -> dict[str, int]:
    return {"initialDelaySeconds": delay, "periodSeconds": period,
            "failureThreshold": failures, "successThreshold": 1, "timeoutSeconds": timeout}


# Probe timings. `standard` is also the default when a probe names no profile.
PROBES: dict[str, dict[str, int]] = {
    "fast": _probe(5, 10, 2, 5),
    "standard": _probe(15, 20, 3, 10),
    "patient": _probe(30, 30, 5, 10),
    "slow-start": _probe(0, 10, 30, 10),
    "slow": _probe(30, 30, 5, 10),  # orksync alias of patient
}
PROBE_DEFAULT = "standard"

# Container securityContext.
CONTAINER_SECURITY: dict[str, dict[str, Any]] = {
    "baseline": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["NET_RAW"]}},
    "restricted": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                   "capabilities": {"drop": ["ALL"]}},
    "hardened": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                 "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}},
}

# Pod securityContext (`podSecurity`).
POD_SECURITY: dict[str, dict[str, Any]] = {
    "baseline": {"runAsNonRoot": False},
    "restricted": {"runAsNonRoot": True, "runAsUser": 1000},
    "hardened": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                 "fsGroup": 65534},
}

# Deployment rolling update: (maxSurge, maxUnavailable). A StatefulSet has no surge and
# its maxUnavailable must be >= 1, so there a 0 means "leave the Kubernetes default (1)".
ROLLING_UPDATE: dict[str, tuple[int | str, int | str]] = {
    "safe": (1, 0),
    "fast": ("25%", "25%"),
    "blue-green": ("100%", 0),
}

_DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]

# NetworkPolicy: the spec fields a profile sets (ingress/egress/policyTypes).
NETWORK_POLICIES: dict[str, dict[str, Any]] = {
    "deny-all": {"policyTypes": ["Ingress", "Egress"]},
    "deny-all-ingress": {"policyTypes": ["Ingress"]},
    "deny-all-egress": {"policyTypes": ["Egress"]},
    "allow-same-namespace": {"ingress": [{"from": [{"podSelector": {}}]}],
                             "policyTypes": ["Ingress"]},
    "allow-dns-egress": {"egress": [{"ports": _DNS_PORTS}], "policyTypes": ["Egress"]},
}


def _quota(pods: str, cpu: str, memory: str, req_cpu: str, req_memory: str) -> dict[str, str]:
    return {"pods": pods, "cpu": cpu, "memory": memory, "requests.cpu": req_cpu,
            "requests.memory": req_memory, "limits.cpu": cpu, "limits.memory": memory}


# ResourceQuota `hard`.
RESOURCE_QUOTAS: dict[str, dict[str, str]] = {
    "small": _quota("10", "2", "4Gi", "1", "2Gi"),
    "medium": _quota("20", "4", "8Gi", "2", "4Gi"),
    "large": _quota("50", "8", "16Gi", "4", "8Gi"),
    "xlarge": _quota("100", "16", "32Gi", "8", "16Gi"),
}


def _limits(cpu: str, memory: str, req_cpu: str, req_memory: str) -> list[dict[str, Any]]:
    return [{"type": "Container", "default": {"cpu": cpu, "memory": memory},
             "defaultRequest": {"cpu": req_cpu, "memory": req_memory}}]


# LimitRange `limits` (orksync): per-container defaults, no maximum, so that no pod is
# rejected; sized like the resources profiles (small = Orkestra's documented example).
LIMIT_RANGES: dict[str, list[dict[str, Any]]] = {
    "small": _limits("500m", "512Mi", "100m", "128Mi"),
    "medium": _limits("1", "1Gi", "250m", "256Mi"),
    "large": _limits("2", "2Gi", "500m", "512Mi"),
    "xlarge": _limits("4", "4Gi", "1", "1Gi"),
}


def _rules(window: int, select: str, *policies: tuple[str, int, int]) -> dict[str, Any]:
    return {"stabilizationWindowSeconds": window, "selectPolicy": select,
            "policies": [{"type": t, "value": v, "periodSeconds": p} for t, v, p in policies]}


# HPA behavior profiles: (CPU utilisation target used when none is declared, behavior).
HPA_BEHAVIORS: dict[str, tuple[int, dict[str, Any]]] = {
    "web": (70, {"scaleUp": _rules(0, "Max", ("Percent", 100, 15), ("Pods", 4, 15)),
                 "scaleDown": _rules(300, "Min", ("Percent", 10, 60))}),
    "api": (60, {"scaleUp": _rules(0, "Max", ("Percent", 100, 15), ("Pods", 4, 15)),
                 "scaleDown": _rules(600, "Min", ("Percent", 5, 60))}),
    "latency-sensitive": (50, {"scaleUp": _rules(0, "Max", ("Percent", 200, 15),
                                                 ("Pods", 10, 15)),
                               "scaleDown": _rules(900, "Min", ("Percent", 5, 120))}),
    "batch": (80, {"scaleUp": _rules(30, "Max", ("Percent", 100, 60)),
                   "scaleDown": _rules(120, "Min", ("Percent", 50, 60))}),
    "cost-optimized": (80, {"scaleUp": _rules(180, "Min", ("Percent", 25, 60)),
                            "scaleDown": _rules(60, "Max", ("Percent", 50, 60))}),
}

# PDB behavior profiles: (minAvailable, maxUnavailable).
PDB_BEHAVIORS: dict[str, tuple[int | str | None, int | str | None]] = {
    "zero-downtime": ("100%", None),
    "rolling": (None, 1),
    "relaxed": (None, "25%"),
}

"""HorizontalPodAutoscaler (autoscaling/v2) and PodDisruptionBudget (policy/v1):
Orkestra's builders (semantics §2.4). Pure.

HPA: `scaleTargetRef {apiVersion, kind (both required), name (default: the custom
resource's name)}`, `minReplicas` (default 1, at least 1), `maxReplicas` (default 1, not
below minReplicas), `targetCPUUtilizationPercentage` → one Resource metric (cpu,
Utilization). `behavior`: {profile} (profiles.HPA_BEHAVIORS; also sets the CPU target when
none is declared) or explicit `scaleUp`/`scaleDown` {stabilizationWindowSeconds,
selectPolicy (Max, Min, Disabled), policies[] {type (Pods, Percent), value,
periodSeconds}} — not both. Empty numbers take their defaults; text that is not a number
is an error (Orkestra falls back to the default).

PDB: `minAvailable`/`maxUnavailable` as a whole number or a percentage; when both are
set minAvailable wins (Orkestra). `behavior {profile}` (profiles.PDB_BEHAVIORS) cannot be
combined with either. `selector` (flat labels) → matchLabels; empty → `selector: {}`,
which in policy/v1 selects every pod of the namespace (Orkestra's documented behaviour).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from orksync.render.builders import BuildContext, BuildError, metadata
from orksync.render.builders.common import (
    as_int,
    as_text,
    choice,
    exclusive,
    int_or_percent,
    node,
    nodes,
    profile,
    required,
    selector,
    sub,
)
from orksync.render.builders.profiles import HPA_BEHAVIORS, PDB_BEHAVIORS

SELECT_POLICIES = ("Max", "Min", "Disabled")
POLICY_TYPES = ("Pods", "Percent")


def build_hpa(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    ref = node(entry.get("scaleTargetRef"), "scaleTargetRef")
    target = {
        "apiVersion": required(ref.get("apiVersion"), "scaleTargetRef.apiVersion",
                               " (such as apps/v1)"),
        "kind": required(ref.get("kind"), "scaleTargetRef.kind", " (such as Deployment)"),
        "name": as_text(ref.get("name"), "scaleTargetRef.name") or ctx.cr_name,
    }
    low = as_int(entry.get("minReplicas"), "minReplicas", default=1, minimum=1)
    high = as_int(entry.get("maxReplicas"), "maxReplicas", default=1, minimum=1)
    assert low is not None and high is not None
    if high < low:
        raise BuildError("maxReplicas", f"must not be below minReplicas ({low}), got {high}")
    cpu = as_int(entry.get("targetCPUUtilizationPercentage"),
                 "targetCPUUtilizationPercentage", minimum=1)
    spec: dict[str, Any] = {"scaleTargetRef": target, "minReplicas": low, "maxReplicas": high}
    behavior_in = node(entry.get("behavior"), "behavior")
    name = as_text(behavior_in.get("profile"), "behavior.profile")
    if name:
        exclusive(behavior_in, "behavior", ("scaleUp", "scaleDown"))
        profile_cpu, behavior = profile(name, HPA_BEHAVIORS, "behavior.profile")
        behavior = copy.deepcopy(behavior)
        cpu = cpu if cpu is not None else profile_cpu
    else:
        behavior = {key: _scaling_rules(behavior_in[key], sub("behavior", key))
                    for key in ("scaleUp", "scaleDown") if behavior_in.get(key) is not None}
    if cpu is not None:
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": cpu}}}]
    if behavior:
        spec["behavior"] = behavior
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": metadata(ctx), "spec": spec}


def _scaling_rules(raw: Any, field: str) -> dict[str, Any]:
    rules_in = node(raw, field)
    out: dict[str, Any] = {}
    window = as_int(rules_in.get("stabilizationWindowSeconds"),
                    sub(field, "stabilizationWindowSeconds"), minimum=0)
    if window is not None:
        out["stabilizationWindowSeconds"] = window
    if as_text(rules_in.get("selectPolicy"), sub(field, "selectPolicy")):
        out["selectPolicy"] = choice(rules_in["selectPolicy"], sub(field, "selectPolicy"),
                                     SELECT_POLICIES)
    policies = []
    for i, policy in enumerate(nodes(rules_in.get("policies"), sub(field, "policies"))):
        f = sub(sub(field, "policies"), i)
        policies.append({
            "type": choice(policy.get("type"), sub(f, "type"), POLICY_TYPES),
            "value": as_int(_given(policy, "value", f), sub(f, "value"), minimum=1),
            "periodSeconds": as_int(_given(policy, "periodSeconds", f), sub(f, "periodSeconds"),
                                    minimum=1),
        })
    if policies:
        out["policies"] = policies
    return out


def _given(raw: Mapping[str, Any], key: str, field: str) -> Any:
    if as_text(raw.get(key), sub(field, key)) == "":
        raise BuildError(sub(field, key), "is required")
    return raw[key]


def build_pdb(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    behavior = node(entry.get("behavior"), "behavior")
    name = as_text(behavior.get("profile"), "behavior.profile")
    if name:
        given = [k for k in ("minAvailable", "maxUnavailable") if as_text(entry.get(k), k)]
        if given:
            raise BuildError("behavior.profile", f"cannot be combined with {', '.join(given)}: "
                             "use either the profile or explicit values")
        low, high = profile(name, PDB_BEHAVIORS, "behavior.profile")
    else:
        low = int_or_percent(entry.get("minAvailable"), "minAvailable")
        high = int_or_percent(entry.get("maxUnavailable"), "maxUnavailable")
    labels = selector(entry.get("selector"), "selector")
    spec: dict[str, Any] = {"selector": {"matchLabels": labels} if labels else {}}
    if low is not None:  # minAvailable wins when both are set (Orkestra)
        spec["minAvailable"] = low
    elif high is not None:
        spec["maxUnavailable"] = high
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata(ctx),
            "spec": spec}

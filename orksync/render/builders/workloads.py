"""Deployment, ReplicaSet, StatefulSet and Pod: Orkestra's builders with their defaults
and coercion (semantics §2.4, §4.5). Pure. The pod shape is orksync.render.builders.pod.

* Deployment/ReplicaSet/StatefulSet select their pods with `{orkestra-owner: <owner>}`,
  the one selector Orkestra gives every workload of a CR (§7.2 #10, kept); the pod
  template carries the object's labels; `annotations` go on the object only.
* `replicas`: Sscanf("%d"), empty/invalid/negative → 1, "0" kept.
* Deployment `rollingUpdate`: {profile: safe|fast|blue-green} or maxSurge/maxUnavailable
  (whole numbers or percentages; not both zero).
* StatefulSet: image `image:tag` when `tag` is set; serviceName defaults to the name;
  updateStrategy OnDelete unless `rollingUpdate` (then RollingUpdate with maxUnavailable
  only: StatefulSets have no surge, and a maxUnavailable of 0 — from the safe/blue-green
  profiles — leaves the Kubernetes default of 1); podManagementPolicy Parallel.
  volumeClaimTemplates: name default `data`, mountPath default `/data` (mounted into the
  container), accessModes default [ReadWriteOnce], storageSize required and validated
  (Orkestra panics, §7.2 #16), storageClassName set only when `storageClass` is non-empty
  (Orkestra always sets the pointer, so an empty class there means "no dynamic
  provisioning"; here it means the cluster's default class).
* Pod: restartPolicy Always; its port is read with Sscanf("%d") like Orkestra's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orksync.render.builders import BuildContext, BuildError, metadata
from orksync.render.builders.common import (
    OWNER_LABEL,
    access_modes,
    as_text,
    exclusive,
    int_or_percent,
    node,
    nodes,
    profile,
    quantity,
    required,
    string_map,
    sub,
)
from orksync.render.builders.pod import container, env_vars, pod_spec
from orksync.render.builders.profiles import ROLLING_UPDATE
from orksync.render.coercion import parse_replicas

__all__ = ["OWNER_LABEL", "build_deployment", "build_pod", "build_replica_set",
           "build_stateful_set", "container", "env_vars"]


def _template(entry: Mapping[str, Any], ctx: BuildContext, **kw: Any) -> dict[str, Any]:
    return {"metadata": {"labels": dict(ctx.labels)}, "spec": pod_spec(entry, ctx.name, **kw)}


def _annotations(entry: Mapping[str, Any]) -> dict[str, str]:
    return string_map(entry.get("annotations"), "annotations")


def build_deployment(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": parse_replicas(as_text(entry.get("replicas"), "replicas")),
        "selector": {"matchLabels": {OWNER_LABEL: ctx.owner_key}},
        "template": _template(entry, ctx),
    }
    strategy = deployment_strategy(entry.get("rollingUpdate"))
    if strategy:
        spec["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": metadata(ctx, _annotations(entry)), "spec": spec}


def build_replica_set(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": metadata(ctx, _annotations(entry)),
        "spec": {
            "replicas": parse_replicas(as_text(entry.get("replicas"), "replicas")),
            "selector": {"matchLabels": {OWNER_LABEL: ctx.owner_key}},
            "template": _template(entry, ctx),
        },
    }


def build_pod(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata(ctx, _annotations(entry)),
            "spec": pod_spec(entry, ctx.name, restart_policy="Always", scanf_port=True)}


def build_stateful_set(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    image = required(entry.get("image"), "image")
    tag = as_text(entry.get("tag"), "tag")
    shaped = {**entry, "image": f"{image}:{tag}" if tag else image}
    claims, mounts = volume_claim_templates(entry.get("volumeClaimTemplates"))
    spec: dict[str, Any] = {
        "replicas": parse_replicas(as_text(entry.get("replicas"), "replicas")),
        "serviceName": as_text(entry.get("serviceName"), "serviceName") or ctx.name,
        "selector": {"matchLabels": {OWNER_LABEL: ctx.owner_key}},
        "template": _template(shaped, ctx, claim_mounts=mounts),
        "updateStrategy": statefulset_strategy(entry.get("rollingUpdate")),
        "podManagementPolicy": "Parallel",
    }
    if claims:
        spec["volumeClaimTemplates"] = claims
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": metadata(ctx, _annotations(entry)), "spec": spec}


def volume_claim_templates(raw: Any) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(volumeClaimTemplates, the container mounts for them)."""
    claims: list[dict[str, Any]] = []
    mounts: list[dict[str, str]] = []
    for i, vct in enumerate(nodes(raw, "volumeClaimTemplates")):
        field = sub("volumeClaimTemplates", i)
        name = as_text(vct.get("name"), sub(field, "name")) or "data"
        if any(c["metadata"]["name"] == name for c in claims):
            raise BuildError(sub(field, "name"), f"claim template {name!r} is declared twice")
        size = as_text(vct.get("storageSize"), sub(field, "storageSize"))
        if not size:
            raise BuildError(sub(field, "storageSize"), "is required (a size such as 10Gi)")
        claim: dict[str, Any] = {
            "accessModes": access_modes(vct.get("accessModes"), sub(field, "accessModes")),
            "resources": {"requests": {"storage": quantity(size, sub(field, "storageSize"))}},
        }
        storage_class = as_text(vct.get("storageClass"), sub(field, "storageClass"))
        if storage_class:
            claim["storageClassName"] = storage_class
        claims.append({"metadata": {"name": name}, "spec": claim})
        mounts.append({"name": name, "mountPath": as_text(vct.get("mountPath"),
                                                          sub(field, "mountPath")) or "/data"})
    return claims, mounts


def _rolling(raw: Mapping[str, Any]) -> tuple[int | str | None, int | str | None]:
    name = as_text(raw.get("profile"), "rollingUpdate.profile")
    if name:
        exclusive(raw, "rollingUpdate", ("maxSurge", "maxUnavailable"))
        surge, unavailable = profile(name, ROLLING_UPDATE, "rollingUpdate.profile")
        return surge, unavailable
    return (int_or_percent(raw.get("maxSurge"), "rollingUpdate.maxSurge"),
            int_or_percent(raw.get("maxUnavailable"), "rollingUpdate.maxUnavailable"))


def _zero(value: int | str | None) -> bool:
    return value in (0, "0%")


def deployment_strategy(raw: Any) -> dict[str, Any]:
    spec = node(raw, "rollingUpdate")
    if not spec:
        return {}
    surge, unavailable = _rolling(spec)
    if _zero(surge) and _zero(unavailable):
        raise BuildError("rollingUpdate", "maxSurge and maxUnavailable cannot both be 0: the "
                         "rollout could never progress")
    rolling = {k: v for k, v in (("maxSurge", surge), ("maxUnavailable", unavailable))
               if v is not None}
    return {"type": "RollingUpdate", **({"rollingUpdate": rolling} if rolling else {})}


def statefulset_strategy(raw: Any) -> dict[str, Any]:
    spec = node(raw, "rollingUpdate")
    if not spec:
        return {"type": "OnDelete"}
    if not as_text(spec.get("profile"), "rollingUpdate.profile"):
        if as_text(spec.get("maxSurge"), "rollingUpdate.maxSurge"):
            raise BuildError("rollingUpdate.maxSurge", "does not apply to a StatefulSet (it "
                             "has no surge): use maxUnavailable")
        if _zero(int_or_percent(spec.get("maxUnavailable"), "rollingUpdate.maxUnavailable")):
            raise BuildError("rollingUpdate.maxUnavailable", "must be at least 1 for a "
                             "StatefulSet, got 0")
    _, unavailable = _rolling(spec)
    if unavailable is None or _zero(unavailable):
        return {"type": "RollingUpdate"}
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": unavailable}}

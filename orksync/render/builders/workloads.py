"""Deployment, ReplicaSet, StatefulSet and Pod: Orkestra's builders with their defaults
and coercion; the pod shape is orksync.render.builders.pod. Pure
(docs/katalog-semantics.md#workloads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orksync.durations import parse_duration
from orksync.render.builders import BuildContext, BuildError, Built, metadata
from orksync.render.builders.common import (
    OWNER_LABEL,
    access_modes,
    as_bool,
    as_int,
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

__all__ = ["DEFAULT_COOLDOWN_SECONDS", "OWNER_LABEL", "autoscale_directive",
           "build_deployment", "build_pod", "build_replica_set", "build_stateful_set",
           "container", "env_vars"]

DEFAULT_COOLDOWN_SECONDS = 60  # Orkestra's EffectiveCooldown


def _template(entry: Mapping[str, Any], ctx: BuildContext, **kw: Any) -> dict[str, Any]:
    return {"metadata": {"labels": dict(ctx.labels)}, "spec": pod_spec(entry, ctx.name, **kw)}


def _annotations(entry: Mapping[str, Any]) -> dict[str, str]:
    return string_map(entry.get("annotations"), "annotations")


def _scaled(body: dict[str, Any], entry: Mapping[str, Any]) -> dict[str, Any] | Built:
    """The workload as built, or without `spec.replicas` plus the autoscale directive."""
    directive = autoscale_directive(entry.get("autoscale"), body["spec"]["replicas"])
    if directive is None:
        return body
    del body["spec"]["replicas"]
    return Built(body=body, directives={"autoscale": directive})


def build_deployment(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any] | Built:
    spec: dict[str, Any] = {
        "replicas": parse_replicas(as_text(entry.get("replicas"), "replicas")),
        "selector": {"matchLabels": {OWNER_LABEL: ctx.owner_key}},
        "template": _template(entry, ctx),
    }
    strategy = deployment_strategy(entry.get("rollingUpdate"))
    if strategy:
        spec["strategy"] = strategy
    return _scaled({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": metadata(ctx, _annotations(entry)), "spec": spec}, entry)


def build_replica_set(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any] | Built:
    return _scaled({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": metadata(ctx, _annotations(entry)),
        "spec": {
            "replicas": parse_replicas(as_text(entry.get("replicas"), "replicas")),
            "selector": {"matchLabels": {OWNER_LABEL: ctx.owner_key}},
            "template": _template(entry, ctx),
        },
    }, entry)


def autoscale_directive(raw: Any, replicas: int) -> dict[str, Any] | None:
    """`autoscale:` (conditions already evaluated into `active`) as the applier's
    directive; None when absent. BuildError names the field of a bad value."""
    if raw is None:
        return None
    spec = node(raw, "autoscale")
    high = as_int(spec.get("max"), "autoscale.max", minimum=1)
    if high is None:
        raise BuildError("autoscale.max", "is required (the most replicas the autoscaler "
                         "may set)")
    low = as_int(spec.get("min"), "autoscale.min", minimum=0)
    if low is not None and low >= high:
        raise BuildError("autoscale.min", f"must be below max ({high}), got {low}")
    cooldown_text = as_text(spec.get("cooldown"), "autoscale.cooldown")
    try:
        cooldown = parse_duration(cooldown_text).total_seconds() if cooldown_text \
            else DEFAULT_COOLDOWN_SECONDS
    except ValueError as err:
        raise BuildError("autoscale.cooldown", str(err)) from err
    out: dict[str, Any] = {
        "replicas": replicas,
        "min": low if low is not None else min(replicas, high),
        "max": high,
        "cooldownSeconds": int(cooldown) if float(cooldown).is_integer() else cooldown,
    }
    for key, step in (("scaleUp", "increment"), ("scaleDown", "decrement")):
        direction = _direction(spec.get(key), f"autoscale.{key}", step)
        if direction is not None:
            out[key] = direction
    return out


def _direction(raw: Any, field: str, step: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    spec = node(raw, field)
    active = as_bool(spec.get("active"), sub(field, "conditions"), default=True)
    target = as_int(spec.get("target"), sub(field, "target"), minimum=0)
    amount = as_int(spec.get(step), sub(field, step), minimum=1)
    if target is not None and amount is not None:
        raise BuildError(field, f"target and {step} cannot both be set: target jumps to a "
                         f"count, {step} moves by a step")
    if target is not None:
        return {"active": active, "target": target}
    return {"active": active, step: 1 if amount is None else amount}


def build_pod(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata(ctx, _annotations(entry)),
            "spec": pod_spec(entry, ctx.name, restart_policy="Always", scanf_port=True)}


def build_stateful_set(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any] | Built:
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
    return _scaled({"apiVersion": "apps/v1", "kind": "StatefulSet",
                    "metadata": metadata(ctx, _annotations(entry)), "spec": spec}, entry)


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

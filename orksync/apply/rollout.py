"""Rolling workloads when a Secret they use changes: a pod-template annotation carrying a
hash of the Secrets of the same owner (Reloader's annotation strategy). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orksync.apply.compare import fingerprint
from orksync.model import ObjRef


def pod_template(body: dict[str, Any]) -> dict[str, Any] | None:
    """The pod template of a workload body (Deployment, StatefulSet, ReplicaSet, CronJob)."""
    spec = body.get("spec") or {}
    if body.get("kind") == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    template = spec.get("template")
    return template if isinstance(template, dict) else None


def referenced_secrets(pod_spec: Mapping[str, Any]) -> set[str]:
    """Names of the Secrets a pod spec reads: env, envFrom and volumes."""
    names: set[str] = set()
    containers = [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or [])]
    for c in containers:
        for env in c.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef") or {}
            if ref.get("name"):
                names.add(ref["name"])
        for src in c.get("envFrom") or []:
            if (src.get("secretRef") or {}).get("name"):
                names.add(src["secretRef"]["name"])
    for vol in pod_spec.get("volumes") or []:
        if (vol.get("secret") or {}).get("secretName"):
            names.add(vol["secret"]["secretName"])
    return names


ROLLOUT_ANNOTATION = "orksync.io/secrets-hash"


def add_rollout_annotation(body: dict[str, Any], owner: ObjRef, namespace: str,
                           hashes: Mapping[tuple[ObjRef, str, str], str]) -> None:
    """Stamp the pod template with a hash of the Secrets of the same owner it uses, so a
    rotation rolls the workload (Reloader's annotation strategy). Stable while the Secrets
    do not change, so it never looks like drift."""
    template = pod_template(body)
    if template is None:
        return
    used = sorted(n for n in referenced_secrets(template.get("spec") or {})
                  if (owner, namespace, n) in hashes)
    if not used:
        return
    digest = fingerprint({n: hashes[(owner, namespace, n)] for n in used})[:16]
    template.setdefault("metadata", {}).setdefault("annotations", {})[ROLLOUT_ANNOTATION] = \
        digest

"""Rolling workloads when a Secret they use changes: a pod-template annotation carrying a
hash of the Secrets of the same owner (Reloader's annotation strategy). Pure.

The annotation `orksync.io/secrets-hash` is orksync's own field, not part of the user's
spec: the apply engine leaves it out of the body's fingerprint, and whenever a live
workload's value differs from the one its Secrets give (a rotation, a re-issued
certificate, a key added), it is written alone by a server-side apply under the field
manager `orksync-rollout` (`rollout_body`), whatever the workload's write policy
(create-if-absent included). A workload applied under `orksync` carries the same value in
its body, so the two managers agree and neither takes the field back from the other.

Only Deployments, StatefulSets and DaemonSets are rolled this way: a Job's pod template is
immutable, and a CronJob's template reaches only the Jobs it starts later (its body
still carries the annotation when it is applied).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from orksync.apply.compare import fingerprint
from orksync.model import ObjRef

ROLLOUT_ANNOTATION = "orksync.io/secrets-hash"
ROLLOUT_FIELD_MANAGER = "orksync-rollout"
ROLLED_KINDS = (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
                ("apps/v1", "DaemonSet"))


def pod_template(body: dict[str, Any]) -> dict[str, Any] | None:
    """The pod template of a workload body (Deployment, StatefulSet, ReplicaSet, CronJob)."""
    spec = body.get("spec") or {}
    if body.get("kind") == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    template = spec.get("template")
    return template if isinstance(template, dict) else None


def referenced_secrets(pod_spec: Mapping[str, Any]) -> set[str]:
    """Names of the Secrets a pod spec reads: env `valueFrom.secretKeyRef`, `envFrom`,
    `secret` volumes and the `secret` sources of projected volumes."""
    names: set[str] = set()
    containers = [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or []),
                  *(pod_spec.get("ephemeralContainers") or [])]
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
        for source in (vol.get("projected") or {}).get("sources") or []:
            if ((source or {}).get("secret") or {}).get("name"):
                names.add(source["secret"]["name"])
    return names


def rollout_digest(template: Mapping[str, Any], hashes: Mapping[str, str]) -> str | None:
    """The annotation's value for a pod template: a digest of the data hashes (by Secret
    name, `hashes`: the Secrets of the workload's own custom resource) of the Secrets it
    reads; None when it reads none of them."""
    used = sorted(n for n in referenced_secrets(template.get("spec") or {}) if n in hashes)
    if not used:
        return None
    return fingerprint({n: hashes[n] for n in used})[:16]


def live_digest(live: Mapping[str, Any]) -> str | None:
    """The annotation's value on a live workload."""
    template = pod_template(dict(live)) or {}
    value = ((template.get("metadata") or {}).get("annotations") or {}).get(ROLLOUT_ANNOTATION)
    return str(value) if value else None


def rollout_body(ref: ObjRef, digest: str) -> dict[str, Any]:
    """The server-side apply body that sets the annotation and nothing else (field
    manager ROLLOUT_FIELD_MANAGER)."""
    template = {"metadata": {"annotations": {ROLLOUT_ANNOTATION: digest}}}
    return {"apiVersion": ref.api_version, "kind": ref.kind,
            "metadata": {"name": ref.name, "namespace": ref.namespace},
            "spec": {"template": template}}


def is_rolled(ref: ObjRef) -> bool:
    return (ref.api_version, ref.kind) in ROLLED_KINDS


def read_secrets(body: Mapping[str, Any], owner: ObjRef, namespace: str,
                 hashes: Mapping[tuple[ObjRef, str, str], str],
                 written: Set[tuple[ObjRef, str, str]]) -> list[str]:
    """The Secrets of the same owner whose hashes a workload's annotation is made of and
    that this apply read rather than wrote (`written`): a rotation (`orksync rotate`, the
    agent's schedule) may have changed them since they were read. When the annotation
    differs from the live workload's, the apply reads them again before it writes the
    workload, so that it never puts back the hash of the Secrets a rotation replaced
    (and rolled the workload for) between the two stages."""
    template = pod_template(dict(body)) or {}
    return sorted(name for name in referenced_secrets(template.get("spec") or {})
                  if (owner, namespace, name) in hashes and
                  (owner, namespace, name) not in written)


def add_rollout_annotation(body: dict[str, Any], owner: ObjRef, namespace: str,
                           hashes: Mapping[tuple[ObjRef, str, str], str]) -> str | None:
    """Stamp the pod template with a hash of the Secrets of the same owner it uses, so a
    change of their data rolls the workload. Stable while the Secrets do not change, so
    it never looks like drift. Returns the value (None: the template reads none)."""
    template = pod_template(body)
    if template is None:
        return None
    own = {name: hashes[(owner, namespace, name)]
           for name in referenced_secrets(template.get("spec") or {})
           if (owner, namespace, name) in hashes}
    digest = rollout_digest(template, own)
    if digest is None:
        return None
    template.setdefault("metadata", {}).setdefault("annotations", {})[ROLLOUT_ANNOTATION] = \
        digest
    return digest

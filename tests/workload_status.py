"""The status a Deployment controller writes, written by the test: the test control plane
runs no deployment controller and no kubelet (testbed.controlplane.CONTROLLERS),
so a Deployment's status is whatever a test writes through `/status`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from orksync.cluster.kube import Kube
from orksync.model import ObjRef

MERGE = "application/merge-patch+json"


def _cond(ctype: str, status: str, reason: str, message: str) -> dict[str, str]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastUpdateTime": now, "lastTransitionTime": now}


def rolled_out(replicas: int, generation: int = 1) -> dict[str, Any]:
    """A finished rollout: every replica updated, ready and available."""
    return {"observedGeneration": generation, "replicas": replicas,
            "updatedReplicas": replicas, "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                _cond("Available", "True", "MinimumReplicasAvailable",
                      "Deployment has minimum availability."),
                _cond("Progressing", "True", "NewReplicaSetAvailable",
                      "ReplicaSet has successfully progressed.")]}


def deadline_exceeded(replicas: int, name: str, generation: int = 1) -> dict[str, Any]:
    """A rollout that made no progress within progressDeadlineSeconds."""
    return {"observedGeneration": generation, "replicas": replicas,
            "updatedReplicas": replicas, "unavailableReplicas": replicas,
            "conditions": [
                _cond("Available", "False", "MinimumReplicasUnavailable",
                      "Deployment does not have minimum availability."),
                _cond("Progressing", "False", "ProgressDeadlineExceeded",
                      f'ReplicaSet "{name}-5d9c7b" has timed out progressing.')]}


def write_status(kube: Kube, ref: ObjRef, status: dict[str, Any]) -> None:
    """Merge-patch `status` into the object's `/status` (as its controller would)."""
    res = kube.resource(ref.api_version, ref.kind)
    kube.request("PATCH", res.path(ref.namespace, ref.name, "status"),
                 body={"status": status}, content_type=MERGE,
                 query={"fieldManager": "deployment-controller"})

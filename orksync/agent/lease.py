"""Leader election on a coordination.k8s.io/v1 Lease, so that only one replica writes.

The holder renews the Lease every tick; a standby takes over once `renewTime +
leaseDurationSeconds` has passed. Every write carries the resourceVersion it read, so two
candidates cannot both win. Releasing clears the holder so a standby takes over at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from orksync.apply.kube import Kube
from orksync.errors import ClusterError

log = logging.getLogger(__name__)

MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def _parse(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    for fmt in (MICROTIME, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(value, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


class LeaderElector:
    def __init__(self, kube: Kube, *, name: str, namespace: str, identity: str,
                 duration: float = 15.0,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.kube = kube
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.duration = duration
        self.clock = clock
        self.res = kube.resource("coordination.k8s.io/v1", "Lease")
        self.is_leader = False

    def _body(self, current: dict[str, Any] | None, transitions: int) -> dict[str, Any]:
        now = self.clock().strftime(MICROTIME)
        spec: dict[str, Any] = {"holderIdentity": self.identity,
                                "leaseDurationSeconds": int(self.duration),
                                "renewTime": now, "leaseTransitions": transitions}
        held = current and (current.get("spec") or {}).get("holderIdentity") == self.identity
        spec["acquireTime"] = (current or {}).get("spec", {}).get("acquireTime") if held \
            else now
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if current is not None:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": spec}

    def try_acquire(self) -> bool:
        """Acquire or renew; True while this process is the leader."""
        try:
            current = self.kube.get_or_none(self.res, self.namespace, self.name)
            if current is None:
                self.kube.create(self.res, self._body(None, 0), field_manager="orksync")
                return self._became(True)
            spec = current.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            transitions = int(spec.get("leaseTransitions") or 0)
            if holder == self.identity:
                self._put(self._body(current, transitions))
                return self._became(True)
            renewed = _parse(spec.get("renewTime"))
            ttl = timedelta(seconds=float(spec.get("leaseDurationSeconds") or self.duration))
            if holder and renewed is not None and renewed + ttl > self.clock():
                return self._became(False)
            self._put(self._body(current, transitions + 1))
            log.info("leader election: %s took over the lease %s/%s from %s", self.identity,
                     self.namespace, self.name, holder or "nobody")
            return self._became(True)
        except ClusterError as err:
            if err.status != 409:
                log.warning("leader election: %s", err)
            return self._became(False)

    def _put(self, body: dict[str, Any]) -> None:
        self.kube.request("PUT", self.res.path(self.namespace, self.name), body=body,
                          subject=f"Lease/{self.namespace}/{self.name}")

    def _became(self, leader: bool) -> bool:
        if leader != self.is_leader:
            log.info("leader election: %s is %s", self.identity,
                     "now the leader" if leader else "a standby")
        self.is_leader = leader
        return leader

    def release(self) -> None:
        if not self.is_leader:
            return
        try:
            current = self.kube.get_or_none(self.res, self.namespace, self.name)
            if current and (current.get("spec") or {}).get("holderIdentity") == self.identity:
                body = self._body(current, int(current["spec"].get("leaseTransitions") or 0))
                body["spec"]["holderIdentity"] = ""
                self._put(body)
        except ClusterError as err:
            log.warning("leader election: releasing the lease failed: %s", err)
        self.is_leader = False

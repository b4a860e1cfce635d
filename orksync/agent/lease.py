"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules: expiry judged
on this process's monotonic clock only, writes gated by the renew deadline (`check`), and
a standby's sync request passed to the leader through an annotation of the Lease.
docs/operations.md, "Leader election", states the rules and their margins.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from orksync.cluster.kube import Kube, Resource
from orksync.cluster.outage import Outages
from orksync.errors import ClusterError, LeadershipLost, UsageError

log = logging.getLogger(__name__)

MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"
LEASE = Resource(group="coordination.k8s.io", version="v1", kind="Lease", plural="leases",
                 namespaced=True)  # built in: no discovery, which could fail at start-up
SYNC_REQUESTED = "orksync.io/sync-requested"
JITTER = 0.2  # a standby's tries are spread by up to this fraction of the retry period


class LeaderElector:
    def __init__(self, kube: Kube, *, name: str, namespace: str, identity: str,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0, labels: dict[str, str] | None = None,
                 annotations: dict[str, str] | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 wallclock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration - retry_period:
            raise UsageError(
                f"leader election needs retry period ({retry_period:g}s) < renew deadline "
                f"({renew_deadline:g}s) < lease duration ({lease_duration:g}s) - retry "
                "period, so that a leader stops writing before a standby can take over")
        self.kube = kube
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.monotonic = monotonic
        self.wallclock = wallclock
        self.res = LEASE
        self.labels = dict(labels or {})  # on the Lease, so that a label selector lists it
        self.annotations = dict(annotations or {})  # what the holder says of itself
        self._lock = threading.Lock()
        self._renewed_at: float | None = None  # when our last successful write was sent
        self._observed: dict[str, Any] | None = None  # the Lease's spec as last seen
        self._observed_at = 0.0  # when it changed, at the earliest: a retry period before
        self._was_leading: bool | None = None  # None until the first try has an answer
        self.on_started_leading: Callable[[], None] = lambda: None
        self.on_stopped_leading: Callable[[], None] = lambda: None
        self.on_sync_requested: Callable[[], None] = lambda: None
        # an API server that cannot be reached is logged once, when it begins and ends
        self.outages = Outages(log)
        # why this replica does not lead, for /readyz (`standby_reason`)
        self._why_not = "the lease has not been tried yet"

    # --- the write gate ------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        """True while this process may write: it holds the Lease, renewed less than the
        renew deadline ago."""
        with self._lock:
            renewed = self._renewed_at
        return renewed is not None and self.monotonic() - renewed < self.renew_deadline

    def check(self) -> float:
        """Raise LeadershipLost unless this process may write (`Kube.gate` of the jobs);
        the seconds it may still write without a new renewal, which bound the next
        request's deadline (a write sent now is answered, or given up, before the renew
        deadline, and so before any standby may take the lease over)."""
        with self._lock:
            renewed = self._renewed_at
        left = self.renew_deadline - (self.monotonic() - renewed) if renewed is not None \
            else 0.0
        if left <= 0:
            raise LeadershipLost(f"{self.identity} does not hold the lease "
                                 f"{self.namespace}/{self.name}; writes stopped")
        return left

    @property
    def standby_reason(self) -> str:
        """Why this replica does not lead now: another replica holds the lease (named), or
        the lease could not be read or renewed (the error)."""
        return self._why_not

    # --- one try -------------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """One round: create, renew or take over the Lease. True when this process holds
        it afterwards."""
        sent = self.monotonic()
        try:
            current = self.kube.get_or_none(self.res, self.namespace, self.name)
            if current is None:
                self.kube.create(self.res, self._body(None, 0, sent=sent),
                                 field_manager="orksync")
                self.outages.recovered("lease")
                return self._won(sent)
            spec = dict(current.get("spec") or {})
            now = self.monotonic()
            if spec != self._observed:
                self._observed = spec
                self._observed_at = now - self.retry_period
            holder = str(spec.get("holderIdentity") or "")
            transitions = int(spec.get("leaseTransitions") or 0)
            if holder and holder != self.identity:
                silent = now - self._observed_at
                # the holder's declared duration, or ours if longer (the margin above
                # rests on ours)
                duration = max(float(spec.get("leaseDurationSeconds") or 0),
                               self.lease_duration)
                if silent < duration:
                    self.outages.recovered("lease")
                    self._why_not = f"another replica ({holder}) holds the lease " \
                        f"{self.namespace}/{self.name}"
                    return self._lost()
                log.info("leader election: %s takes over the lease %s/%s from %s "
                         "(unchanged for %.1fs)", self.identity, self.namespace, self.name,
                         holder, silent)
            if holder != self.identity:
                transitions += 1
            self.kube.request("PUT", self.res.path(self.namespace, self.name),
                              body=self._body(current, transitions, sent=sent),
                              subject=f"Lease/{self.namespace}/{self.name}")
            won = self._won(sent)
            self.outages.recovered("lease")
            if SYNC_REQUESTED in ((current.get("metadata") or {}).get("annotations") or {}):
                self.on_sync_requested()
            return won
        except ClusterError as err:
            if err.status == 409:  # another candidate wrote first; it wins this round
                self.outages.recovered("lease")
                self._why_not = f"another replica took the lease {self.namespace}/" \
                    f"{self.name} first"
            elif not err.status or err.status >= 500:  # the API server, not the request
                self.outages.failed("lease", f"leader election: {err}")
                self._why_not = f"the lease {self.namespace}/{self.name} could not be " \
                    f"read or renewed: {err}"
            else:
                log.warning("leader election: %s", err)
                self._why_not = f"the lease {self.namespace}/{self.name} could not be " \
                    f"read or renewed: {err}"
            return self._lost() if not self.leading else True

    def _body(self, current: dict[str, Any] | None, transitions: int, *,
              sent: float) -> dict[str, Any]:
        now = self.wallclock().strftime(MICROTIME)
        spec_now = (current or {}).get("spec") or {}
        held = spec_now.get("holderIdentity") == self.identity
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(int(self.lease_duration), 1),
            "acquireTime": spec_now.get("acquireTime") if held else now,
            "renewTime": now, "leaseTransitions": transitions}
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self.labels:
            meta["labels"] = self.labels
        if self.annotations:
            meta["annotations"] = self.annotations
        if current is not None:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": spec}

    def _won(self, sent: float) -> bool:
        with self._lock:
            self._renewed_at = sent
        self._observed = None  # our own write: the next try sees a record to note
        self._transition(True)
        return True

    def _lost(self) -> bool:
        with self._lock:
            self._renewed_at = None
        self._transition(False)
        return False

    def _transition(self, leading: bool) -> None:
        if leading is self._was_leading:
            return
        self._was_leading = leading
        log.info("leader election: %s is %s", self.identity,
                 "now the leader" if leading else "a standby")
        (self.on_started_leading if leading else self.on_stopped_leading)()

    # --- the loop ------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Try every retry period until `stop` is set; a standby's tries are jittered so
        that candidates do not collide."""
        while not stop.is_set():
            if self._was_leading and not self.leading:  # the deadline passed while waiting
                self._lost()
            self.try_acquire_or_renew()
            if self._was_leading and not self.leading:  # renewals failed until the deadline
                self._lost()
            period = self.retry_period if self._was_leading else \
                self.retry_period * (1 - JITTER * random.random())
            stop.wait(period)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="leader-election",
                                  daemon=True)
        thread.start()
        return thread

    def request_sync(self) -> None:
        """Ask the leader, whoever it is, to sync now: the annotation SYNC_REQUESTED on the
        Lease, which the leader notices at its next renewal, whose write removes it."""
        self.kube.request(
            "PATCH", self.res.path(self.namespace, self.name),
            body={"metadata": {"annotations": {SYNC_REQUESTED: self.wallclock().strftime(
                MICROTIME)}}},
            content_type="application/merge-patch+json",
            subject=f"Lease/{self.namespace}/{self.name}")

    def release(self) -> None:
        """Give the Lease up (holder cleared) if we hold it."""
        was_leading = self.leading
        with self._lock:
            self._renewed_at = None
        self._transition(False)
        if not was_leading:
            return
        try:
            current = self.kube.get_or_none(self.res, self.namespace, self.name)
            if current and (current.get("spec") or {}).get("holderIdentity") == self.identity:
                body = self._body(current, int(current["spec"].get("leaseTransitions") or 0),
                                  sent=self.monotonic())
                body["spec"]["holderIdentity"] = ""
                self.kube.request("PUT", self.res.path(self.namespace, self.name), body=body,
                                  subject=f"Lease/{self.namespace}/{self.name}")
        except ClusterError as err:
            log.warning("leader election: releasing the lease failed: %s", err)

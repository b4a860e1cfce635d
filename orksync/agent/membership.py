"""Replicas of the Sync controller share the Syncs (docs/operations.md, "Scaling out the
Sync objects"): a member Lease per replica is its slot, renewed by leader election's
rules; each Sync is served by the replica holding the live slot of the highest
rendezvous weight, and written only under a claim Lease of its own, taken when released
or when its holder is no longer live, so that two replicas never write for one Sync.
A starting replica takes a released slot first; one of a new `--generation` waits for a
slot while the old generation runs, so that a rolling update moves each Sync once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from orksync.agent.lease import LEASE, MICROTIME, LeaderElector
from orksync.cluster.kube import Kube
from orksync.cluster.outage import Outages
from orksync.errors import ClusterError, LeadershipLost

log = logging.getLogger(__name__)

GROUP_LABEL = "orksync.io/scale-out"  # the agent's --name: the replicas that share Syncs
ROLE_LABEL = "orksync.io/role"  # member or claim
SYNC_ANNOTATION = "orksync.io/sync"  # a claim's Sync, namespace/name
SLOT_ANNOTATION = "orksync.io/slot"  # a member Lease's slot: the replica that made it
GENERATION_ANNOTATION = "orksync.io/generation"  # its holder's --generation
# a member Lease of another replica unchanged for this many lease durations is deleted:
# its holder was killed (one stopped releases its slot), and its Syncs moved long ago
ABANDONED = 4


def _digest(text: str, size: int = 16) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def weight(key: str, identity: str) -> bytes:
    """The rendezvous weight of a member for a Sync."""
    return hashlib.sha256(f"{key}\0{identity}".encode()).digest()


def rendezvous(key: str, members: Iterable[str]) -> str:
    """The member of the highest weight for `key` ("" when there is none)."""
    return max(members, key=lambda m: (weight(key, m), m), default="")


def group_value(group: str) -> str:
    """The agent's name as a label value (63 characters at most)."""
    return group if len(group) <= 63 else _digest(group, 32)


def claim_name(group: str, key: str) -> str:
    return f"orksync-claim-{_digest(group + '/' + key, 24)}"


def member_name(group: str, identity: str) -> str:
    return f"orksync-member-{_digest(group + '/' + identity, 24)}"


def waiting_name(group: str, identity: str) -> str:
    return f"orksync-waiting-{_digest(group + '/' + identity, 24)}"


@dataclass(slots=True)
class _Seen:
    spec: dict[str, Any]
    at: float  # when it changed, at the earliest (as a standby notes the leader's Lease)


@dataclass(frozen=True, slots=True)
class Taken:
    """A claim this replica has just taken: from whom, and for how long the Sync had no
    server (from the release, or from the previous holder's last renewal seen)."""

    previous: str  # "" for a claim made new or released
    how: str  # new, released, expired, own (a claim of this identity from before)
    unserved: float | None


class Membership:
    def __init__(self, kube: Kube, *, group: str, namespace: str, identity: str,
                 lease_duration: float, renew_deadline: float, retry_period: float,
                 generation: str = "",
                 monotonic: Callable[[], float] = time.monotonic,
                 wallclock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.kube = kube
        self.group = group
        self.namespace = namespace
        self.identity = identity
        self.generation = generation
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.monotonic = monotonic
        self.wallclock = wallclock
        labels = {GROUP_LABEL: group_value(group), ROLE_LABEL: "member"}
        self.member = LeaderElector(kube, name=member_name(group, identity),
                                    namespace=namespace, identity=identity,
                                    lease_duration=lease_duration,
                                    renew_deadline=renew_deadline, retry_period=retry_period,
                                    labels=labels, annotations={
                                        SLOT_ANNOTATION: identity,
                                        GENERATION_ANNOTATION: generation},
                                    monotonic=monotonic, wallclock=wallclock)
        self.waiting = ""  # why this replica waits for a slot ("": it has one)
        self._lock = threading.Lock()
        self._held: set[str] = set()  # the Syncs whose claim this replica holds this term
        self._term = 0  # counts the lapses of the member gate: a claim is of one term
        self.on_lost: Callable[[set[str]], None] = lambda keys: None
        self._seen: dict[str, _Seen] = {}  # member Lease name: its spec as last seen
        self._seen_lock = threading.Lock()  # the slot taker and the rebalance loop note
        self._live: dict[str, float] = {}  # live identity: its last change seen
        self._slots: dict[str, str] = {}  # the live slots: slot -> the identity holding it
        self._claims: dict[str, dict[str, Any]] = {}  # Sync key: its claim Lease
        self._fresh = False  # the last listing succeeded: claims may be taken
        self.outages = Outages(log)

    # --- the write gate ------------------------------------------------------------------

    def serves(self, key: str) -> bool:
        with self._lock:
            return key in self._held

    def held(self) -> set[str]:
        with self._lock:
            return set(self._held)

    def check(self, key: str) -> float:
        """Raise LeadershipLost unless this replica may write for the Sync `key`; the
        seconds it may still write (the member gate's, see LeaderElector.check)."""
        left = self.member.check()
        if not self.serves(key):
            raise LeadershipLost(f"{self.identity} does not hold the claim of the Sync {key}; "
                                 "writes stopped", subject=f"Sync/{key}")
        return left

    # --- the live set --------------------------------------------------------------------

    def live(self) -> set[str]:
        with self._lock:
            return set(self._live)

    def owner(self, key: str) -> str:
        """The replica that should serve the Sync `key` now, by this replica's view."""
        with self._lock:
            slots = dict(self._slots)
        return slots.get(rendezvous(key, slots), "")

    def holder(self, key: str) -> str:
        """The replica the Sync's claim names (from the last listing)."""
        with self._lock:
            claim = self._claims.get(key) or {}
        return str((claim.get("spec") or {}).get("holderIdentity") or "")

    def start(self, stop: threading.Event) -> threading.Thread:
        """Take a slot, then renew its member Lease, in a thread of its own (never behind
        a hand-over)."""
        self.member.on_stopped_leading = self._lapse
        thread = threading.Thread(target=self._run, args=(stop,), name="membership",
                                  daemon=True)
        thread.start()
        return thread

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set() and not self.take_slot():
            stop.wait(self.retry_period)
        self.member.run(stop)

    def take_slot(self) -> bool:
        """One look for a slot; True once this replica has one to renew: a released slot
        it took, or its own (new, or held from before this start) unless live replicas
        of another generation run and it must wait for one of theirs."""
        try:
            leases = self._member_leases()
        except ClusterError as err:
            self.waiting = f"the member Leases could not be listed: {err}"
            return False
        now = self.monotonic()
        others: set[str] = set()
        released = []
        for lease in leases:
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            if holder == self.identity:
                self._use_slot(lease)
                return True
            if not holder:
                released.append(lease)
            elif self._note(lease, now)[0]:
                annotations = (lease.get("metadata") or {}).get("annotations") or {}
                others.add(str(annotations.get(GENERATION_ANNOTATION) or ""))
        for lease in sorted(released, key=lambda item: str(item["metadata"]["name"])):
            self._use_slot(lease)
            if self.member.try_acquire_or_renew():
                log.info("scale-out: %s takes the released slot %s", self.identity,
                         self.member.annotations[SLOT_ANNOTATION])
                self._end_waiting()
                return True
        if self.generation and others - {self.generation}:
            self.waiting = (f"waiting for a replica of generation "
                            f"{', '.join(sorted(others - {self.generation}))} to leave "
                            "(a rolling update: this replica takes its place)")
            self._announce_waiting()
            return False
        self.member.name = member_name(self.group, self.identity)
        self.member.annotations[SLOT_ANNOTATION] = self.identity
        self.waiting = ""
        self._end_waiting()
        return True

    def _announce_waiting(self) -> None:
        """Create or renew this replica's `waiting` Lease: while it changes, the others
        keep a freshly released slot vacant for it."""
        name = waiting_name(self.group, self.identity)
        stamp = self.wallclock().strftime(MICROTIME)
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": self.namespace,
                         "labels": {GROUP_LABEL: group_value(self.group),
                                    ROLE_LABEL: "waiting"},
                         "annotations": {GENERATION_ANNOTATION: self.generation}},
            "spec": {"holderIdentity": self.identity, "renewTime": stamp,
                     "leaseDurationSeconds": max(int(self.lease_duration), 1)}}
        try:
            current = self.kube.get_or_none(LEASE, self.namespace, name)
            if current is None:
                self.kube.create(LEASE, body, field_manager="orksync",
                                 subject=f"Lease/{self.namespace}/{name}")
            else:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                self.kube.request("PUT", LEASE.path(self.namespace, name), body=body,
                                  subject=f"Lease/{self.namespace}/{name}")
        except ClusterError as err:
            log.warning("scale-out: announcing that %s waits for a slot: %s",
                        self.identity, err)

    def _end_waiting(self) -> None:
        name = waiting_name(self.group, self.identity)
        try:
            self.kube.delete(LEASE, self.namespace, name, subject=f"Lease/{self.namespace}/{name}")
        except ClusterError as err:
            if err.status != 404:  # else it ages out: the others stop keeping slots for it
                log.warning("scale-out: %s: the waiting Lease: %s", self.identity, err)

    def _use_slot(self, lease: dict[str, Any]) -> None:
        meta = lease.get("metadata") or {}
        self.member.name = str(meta.get("name"))
        self.member.annotations[SLOT_ANNOTATION] = _slot(lease)
        self.waiting = ""

    def _member_leases(self) -> list[dict[str, Any]]:
        return list(self.kube.list(
            LEASE, namespace=self.namespace,
            label_selector=f"{GROUP_LABEL}={group_value(self.group)},{ROLE_LABEL}=member"))

    def _note(self, lease: dict[str, Any], now: float) -> tuple[bool, float]:
        """Note a member Lease as seen now: whether its holder is live (another replica
        whose Lease changed less than the lease duration ago), and when it last changed."""
        name = str((lease.get("metadata") or {}).get("name"))
        spec = dict(lease.get("spec") or {})
        with self._seen_lock:
            seen = self._seen.get(name)
            if seen is None or seen.spec != spec:
                seen = self._seen[name] = _Seen(spec, now - self.retry_period)
        holder = str(spec.get("holderIdentity") or "")
        duration = max(float(spec.get("leaseDurationSeconds") or 0), self.lease_duration)
        return bool(holder) and holder != self.identity and now - seen.at < duration, seen.at

    def _lapse(self) -> None:
        """The member gate closed: every claim of this term is lost (another replica may
        take them once the member Lease looks expired)."""
        with self._lock:
            self._term += 1
            lost, self._held = set(self._held), set()
        if lost:
            log.warning("scale-out: %s stopped renewing its member Lease: its %d Sync(s) "
                        "are given up", self.identity, len(lost))
        self.on_lost(lost)

    def refresh(self) -> set[str]:
        """List the members and claims: the live set and the claims as they are now.
        Returns the Syncs whose claims name another replica now (taken while this
        replica's gate was closed): their writes are stopped already."""
        lost: set[str] = set()
        try:
            leases = list(self.kube.list(
                LEASE, namespace=self.namespace,
                label_selector=f"{GROUP_LABEL}={group_value(self.group)}"))
        except ClusterError as err:
            self.outages.failed("members", f"scale-out: the member Leases: {err}")
            with self._lock:
                self._fresh = False
            return lost
        self.outages.recovered("members")
        now = self.monotonic()
        live: dict[str, float] = {}
        slots: dict[str, str] = {}
        claims: dict[str, dict[str, Any]] = {}
        released: list[tuple[dict[str, Any], float]] = []  # and when each last changed
        waiting = False
        names = set()
        for lease in leases:
            meta = lease.get("metadata") or {}
            role = (meta.get("labels") or {}).get(ROLE_LABEL)
            if role == "claim":
                key = str((meta.get("annotations") or {}).get(SYNC_ANNOTATION) or "")
                if key:
                    claims[key] = lease
                continue
            if role not in ("member", "waiting"):
                continue
            name = str(meta.get("name"))
            names.add(name)
            is_live, changed = self._note(lease, now)
            if is_live:
                if role == "waiting":
                    waiting = True
                    continue
                holder = str(lease["spec"]["holderIdentity"])
                live[holder] = changed
                slots[_slot(lease)] = holder
            elif role == "member" and not (lease.get("spec") or {}).get("holderIdentity"):
                released.append((lease, changed))
            elif role == "member" and str(lease["spec"]["holderIdentity"]) != self.identity \
                    and now - changed >= ABANDONED * self.lease_duration:
                self._delete_released(lease)  # a replica killed: its slot is nobody's
        with self._seen_lock:
            for name in set(self._seen) - names:
                del self._seen[name]
        for lease, changed in released:
            if now - changed >= self.lease_duration:
                self._delete_released(lease)
            elif waiting:
                slots.setdefault(_slot(lease), "")  # vacant: kept for the waiting replica
        if self.member.leading:
            live[self.identity] = now
            slots[self.member.annotations[SLOT_ANNOTATION]] = self.identity
        with self._lock:
            self._live, self._slots, self._claims, self._fresh = live, slots, claims, True
            for key in list(self._held):
                holder = str(((claims.get(key) or {}).get("spec") or {}).get(
                    "holderIdentity") or "")
                if holder != self.identity:  # taken: our gate was closed by then
                    self._held.discard(key)
                    lost.add(key)
        if lost:
            log.warning("scale-out: %s lost the claims of %d Sync(s): %s", self.identity,
                        len(lost), ", ".join(sorted(lost)[:5]))
        return lost

    # --- claims --------------------------------------------------------------------------

    def acquire(self, key: str) -> Taken | None:
        """Take the Sync's claim if it is free or its holder is not live; None when it is
        not taken (held by a live replica, or another candidate wrote first)."""
        with self._lock:
            if not self._fresh or not self.member.leading:
                return None
            term = self._term
            claim = self._claims.get(key)
            live = dict(self._live)
        now_wall = self.wallclock()
        stamp = now_wall.strftime(MICROTIME)
        name = claim_name(self.group, key)
        meta: dict[str, Any] = {
            "name": name, "namespace": self.namespace,
            "labels": {GROUP_LABEL: group_value(self.group), ROLE_LABEL: "claim"},
            "annotations": {SYNC_ANNOTATION: key}}
        spec: dict[str, Any] = {"holderIdentity": self.identity,
                                "leaseDurationSeconds": max(int(self.lease_duration), 1),
                                "acquireTime": stamp, "renewTime": stamp,
                                "leaseTransitions": 0}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": spec}
        try:
            if claim is None:
                self.kube.create(LEASE, body, field_manager="orksync",
                                 subject=f"Lease/{self.namespace}/{name}")
                taken = Taken(previous="", how="new", unserved=None)
            else:
                old = claim.get("spec") or {}
                previous = str(old.get("holderIdentity") or "")
                if previous and previous != self.identity and previous in live:
                    return None
                if not previous:
                    taken = Taken(previous="", how="released",
                                  unserved=_since(old.get("renewTime"), now_wall))
                elif previous == self.identity:
                    taken = Taken(previous=previous, how="own", unserved=None)
                else:
                    last = self._last_change(previous)
                    taken = Taken(previous=previous, how="expired",
                                  unserved=None if last is None else self.monotonic() - last)
                meta["resourceVersion"] = (claim.get("metadata") or {}).get("resourceVersion")
                spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + \
                    (previous != self.identity)
                self.kube.request("PUT", LEASE.path(self.namespace, name), body=body,
                                  subject=f"Lease/{self.namespace}/{name}")
        except ClusterError as err:
            if err.status not in (404, 409):
                log.warning("scale-out: the claim of the Sync %s: %s", key, err)
            return None
        with self._lock:
            if term != self._term or not self.member.leading:
                return None  # the gate closed meanwhile: taken again at a next round
            self._held.add(key)
        return taken

    def _delete_released(self, lease: dict[str, Any]) -> None:
        """A slot released a lease duration ago and not taken (a scale-down), or held by a
        replica that stopped renewing it long ago; the resourceVersion read is a
        precondition, so a slot renewed or taken meanwhile stays."""
        meta = lease["metadata"]
        try:
            self.kube.delete(LEASE, self.namespace, str(meta["name"]),
                             subject=f"Lease/{self.namespace}/{meta['name']}",
                             precondition_version=meta.get("resourceVersion"))
        except ClusterError as err:
            if err.status not in (404, 409):
                log.warning("scale-out: deleting the released slot %s: %s", meta["name"], err)

    def _last_change(self, identity: str) -> float | None:
        with self._seen_lock:
            for seen in self._seen.values():
                if seen.spec.get("holderIdentity") == identity:
                    return seen.at
        return None

    def drop(self, key: str) -> None:
        """Stop writing for the Sync at once (its gate closes); its claim stays until
        `release`."""
        with self._lock:
            self._held.discard(key)

    def release(self, key: str, *, delete: bool = False) -> None:
        """Give the Sync's claim up (holder cleared, or the Lease deleted for a Sync that
        is gone), if this replica holds it."""
        self.drop(key)
        name = claim_name(self.group, key)
        try:
            current = self.kube.get_or_none(LEASE, self.namespace, name)
            if current is None or (current.get("spec") or {}).get(
                    "holderIdentity") != self.identity:
                return
            if delete:
                self.kube.delete(LEASE, self.namespace, name,
                                 subject=f"Lease/{self.namespace}/{name}",
                                 precondition_uid=current["metadata"]["uid"])
                return
            current["spec"]["holderIdentity"] = ""
            current["spec"]["renewTime"] = self.wallclock().strftime(MICROTIME)
            self.kube.request("PUT", LEASE.path(self.namespace, name), body=current,
                              subject=f"Lease/{self.namespace}/{name}")
        except ClusterError as err:  # its successor waits for the member Lease to expire
            log.warning("scale-out: releasing the claim of the Sync %s failed: %s", key, err)


def _slot(lease: dict[str, Any]) -> str:
    """A member Lease's slot: its annotation, else (a Lease of an older agent) its holder."""
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(SLOT_ANNOTATION) or
               (lease.get("spec") or {}).get("holderIdentity") or
               (lease.get("metadata") or {}).get("name"))


def _since(stamp: Any, now: datetime) -> float | None:
    try:
        then = datetime.strptime(str(stamp), MICROTIME).replace(tzinfo=UTC)
    except ValueError:
        return None
    return max((now - then).total_seconds(), 0.0)

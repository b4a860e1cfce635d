"""The controller of the Sync objects: `orksync agent` without --repo-url. It watches the
Syncs, keeps one root per Sync (orksync.agent.roots) and runs each on a shared pool of
workers, one run per Sync at a time; it owns what the roots share: leadership (one
Lease, or the scale-out membership), the HTTP server with per-Sync webhooks, and the
finalizer's deletions (orksync.agent.finalizer). docs/operations.md, "Sync objects",
says what it decides for each Sync.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from orksync.agent import synchook, syncs, webhook
from orksync.agent.config import AgentConfig
from orksync.agent.finalizer import add_finalizer, finalize
from orksync.agent.lease import LeaderElector
from orksync.agent.membership import Membership
from orksync.agent.metrics import Metrics
from orksync.agent.roots import (
    Root,
    RootBuilder,
    attempted,
    changed,
    find_duplicates,
    reconcile_requested,
    report,
    run_outcome,
    told,
    ui_status,
)
from orksync.agent.runner import Agent
from orksync.agent.server import serve
from orksync.agent.ui.data import RootStatus
from orksync.agent.ui.journal import Journal
from orksync.cluster.kube import Kube
from orksync.cluster.retry import RetryPolicy
from orksync.cluster.shared_watch import SharedInformers
from orksync.cluster.transport import USER_AGENT
from orksync.cluster.watch import Informer
from orksync.errors import ClusterError, InputError, LeadershipLost, OrksyncError
from orksync.model import MANAGED_SELECTOR, SHARD_LABEL
from orksync.sync import ensure_namespace

log = logging.getLogger("orksync.agent.controller")


class SyncTimeout(OrksyncError):
    """A Sync's run passed its `timeout`: its next request ends it (a failure, retried
    with backoff). Not a ClusterError, so that no per-object handler takes it for one
    object's failure."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    base: AgentConfig  # the flags every Sync's root starts from
    lease_name: str = "orksync-syncs-default"
    watch_namespace: str = ""  # "": every namespace
    concurrent_syncs: int = 4
    allow_file_urls: bool = False
    # with leader election and one shard, the replicas share the Syncs (membership.py);
    # --shards N --shard I instead: this replica's Syncs are those of its shard, on a
    # Lease of the shard's own
    shards: int = 1
    shard: int = 0
    generation: str = ""  # --generation: see membership.py


def shard_of(key: str, shards: int) -> int:
    """The static shard of a Sync (`--shards N --shard I`): stable on every replica."""
    import hashlib

    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % shards


def _parse(obj: dict[str, Any], allow_file_urls: bool
           ) -> tuple[syncs.SyncSpec | None, InputError | None]:
    try:
        return syncs.parse_spec(obj, allow_file_urls=allow_file_urls), None
    except InputError as err:
        return None, err


class Controller:
    def __init__(self, config: ControllerConfig, kube: Kube,
                 metrics: Metrics | None = None) -> None:
        self.config = config
        self.kube = kube
        self.metrics = metrics or Metrics()
        base = config.base
        if not kube.user_agent:
            kube.user_agent = f"{USER_AGENT} (agent {base.identity})"
        self.stop_event = threading.Event()
        self.roots: dict[str, Root] = {}
        # the last syncs and repairs of every Sync's root, for the web view
        self.journal = Journal()
        self.lock = threading.Lock()  # the roots and their flags
        self.wake = threading.Condition(self.lock)
        self.elector: LeaderElector | None = None
        self.membership: Membership | None = None
        lease_kube = kube.sibling(timeout=max(base.retry_period, base.renew_deadline / 2),
                                  retry=RetryPolicy(attempts=1))
        if base.leader_elect and config.shards == 1:
            self.membership = Membership(lease_kube, group=config.lease_name,
                                         namespace=base.lease_namespace,
                                         identity=base.identity,
                                         lease_duration=base.lease_duration,
                                         renew_deadline=base.renew_deadline,
                                         retry_period=base.retry_period,
                                         generation=config.generation)
            self.membership.member.on_started_leading = lambda: self.metrics.leader.set(1)
            self.membership.on_lost = self._lost_claims
            kube.gate = self.membership.member.check
        elif base.leader_elect:
            self.elector = LeaderElector(lease_kube, name=config.lease_name,
                                         namespace=base.lease_namespace,
                                         identity=base.identity,
                                         lease_duration=base.lease_duration,
                                         renew_deadline=base.renew_deadline,
                                         retry_period=base.retry_period)
            self.elector.on_started_leading = self._started_leading
            self.elector.on_stopped_leading = self._stopped_leading
            kube.gate = self.elector.check
        self.watch_kube = kube.sibling(timeout=30.0, retry=RetryPolicy(), pool_size=2)
        self.informer: Informer | None = None
        self.pool = ThreadPoolExecutor(max_workers=config.concurrent_syncs,
                                       thread_name_prefix="orksync-sync")
        # one watch per kind for every Sync this replica serves, each Sync's drift repair
        # seeing the objects of its label (orksync.cluster.shared_watch)
        self.shared = SharedInformers(
            self.watch_kube, SHARD_LABEL, within=MANAGED_SELECTOR,
            on_restart=lambda reason: self.metrics.watch_restarts.labels(reason=reason).inc())
        self.builder = RootBuilder(kube, base, self.journal, gate=self._gate,
                                   wake=self._wake, inventories=self._inventories,
                                   shared=self.shared)

    # --- leadership ----------------------------------------------------------------------

    def is_leader(self) -> bool:
        if self.membership is not None:
            return self.membership.member.leading
        return self.elector.leading if self.elector is not None else True

    def mine(self, key: str) -> bool:
        """Whether this replica serves the Sync `key`: its claim (scale-out), else its
        shard's (static shards), else every Sync."""
        if self.membership is not None:
            return self.membership.serves(key)
        if self.config.shards > 1:
            return shard_of(key, self.config.shards) == self.config.shard
        return True

    def _started_leading(self) -> None:
        self.metrics.leader.set(1)
        with self.wake:
            for root in self.roots.values():
                root.wanted = True
            self.wake.notify_all()

    def _stopped_leading(self) -> None:
        """Every root stops: a new term builds them again from the Syncs."""
        self.metrics.leader.set(0)
        with self.lock:
            agents = [(r, r.agent) for r in self.roots.values() if r.agent is not None]
        for root, agent in agents:
            self.builder.drop(root, agent)

    # --- scale-out: which replica serves which Sync (membership.py) --------------------

    def _lost_claims(self, keys: set[str]) -> None:
        """Claims lost while this replica's member gate was closed: their roots stop
        (their writes were refused already)."""
        with self.lock:
            lost = [r for k, r in self.roots.items() if k in keys]
        for root in lost:
            self.metrics.handovers.labels(direction="lost").inc()
            self.builder.stop(root)

    def rebalance(self) -> None:
        """One round: take the claims of the Syncs this replica should serve, hand over
        those it should not (once their running sync ended), release the claims of
        Syncs that are gone."""
        membership = self.membership
        assert membership is not None
        self._lost_claims(membership.refresh())
        if self.informer is None or not self.informer.synced.is_set():
            return  # a Sync not listed yet is not one that is gone
        with self.lock:
            roots = dict(self.roots)
        for key, root in sorted(roots.items()):
            owner = membership.owner(key)
            if not owner:
                continue
            if owner == membership.identity:
                if membership.serves(key):
                    continue
                taken = membership.acquire(key)
                if taken is None:
                    continue
                self.metrics.handovers.labels(direction="taken").inc()
                if taken.unserved is not None:
                    self.metrics.unserved.observe(taken.unserved)
                log.info("Sync %s: served by %s now (%s%s)", key, membership.identity,
                         f"claim {taken.how}", f" from {taken.previous}"
                         if taken.previous and taken.previous != membership.identity else "")
                with self.wake:
                    root.leaving, root.wanted = False, True
                    self.wake.notify_all()
            elif membership.serves(key):
                with self.lock:
                    root.leaving = True
                    busy = root.busy
                if not busy:  # else at a next round, once its sync ended
                    self._hand_over(root, owner)
        for key in membership.held() - set(roots):  # the Sync is gone
            membership.release(key, delete=True)
        self.metrics.syncs_served.set(len(membership.held()))

    def _hand_over(self, root: Root, owner: str) -> None:
        """Close the Sync's gate, stop its watches and drift repair, release its claim."""
        assert self.membership is not None
        self.membership.drop(root.key)
        self.builder.stop(root)
        self.membership.release(root.key)
        with self.lock:
            root.leaving = False
            root.written = {}
        self.metrics.handovers.labels(direction="released").inc()
        log.info("Sync %s: handed over to %s", root.key, owner)

    def _rebalance_loop(self) -> None:
        assert self.membership is not None
        while not self.stop_event.is_set():
            try:
                self.rebalance()
            except Exception:  # a bug must not end the loop: logged, tried again
                log.exception("scale-out: a round failed")
            self.stop_event.wait(self.membership.retry_period)

    # --- the Syncs -----------------------------------------------------------------------

    def _on_event(self, kind: str, obj: dict[str, Any], _before: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        if self.config.watch_namespace and meta.get("namespace") != self.config.watch_namespace:
            return
        key = syncs.key_of(obj)
        dropped: list[tuple[Root, Agent]] = []
        with self.wake:
            units = {k: r for k, r in self.roots.items() if r.sync_key == key}
            if kind == "DELETED":
                wanted: dict[str, tuple[int, int]] = {}
            else:
                first = units.get(key) or next(iter(units.values()), None)
                if first is None or reconcile_requested(obj) != reconcile_requested(
                        first.obj) or changed(obj, first.obj, "generation") or \
                        changed(obj, first.obj, "deletionTimestamp") or first.spec is None:
                    spec, error = _parse(obj, self.config.allow_file_urls)
                else:
                    spec, error = first.spec, first.error
                shards = spec.shards if spec is not None else 1
                wanted = {(spec.unit_key(i) if spec is not None else key): (i, shards)
                          for i in range(shards)}
                for unit, (shard, count) in wanted.items():
                    root = units.get(unit)
                    if root is None or root.shards != count:
                        root = self.roots[unit] = Root(key=unit, obj=obj, shard=shard,
                                                       shards=count)
                    told(root, obj, spec, error)
            removed = [root for unit, root in units.items() if unit not in wanted]
            for root in removed:
                self.roots.pop(root.key, None)
                if root.agent is not None:
                    dropped.append((root, root.agent))
            find_duplicates(self.roots.values())
            self.wake.notify_all()
        for root, agent in dropped:
            self.builder.drop(root, agent)
        for root in removed:
            self.builder.forget(root)

    # --- the loop ------------------------------------------------------------------------

    def dispatch(self) -> None:
        """Hand every Sync with work due to the pool (one run per Sync at a time)."""
        if not self.is_leader():
            return
        now = time.monotonic()
        due: list[tuple[Root, Callable[[Root], None]]] = []
        with self.lock:
            for root in self.roots.values():
                if root.busy or root.leaving or not self.mine(root.key):
                    continue
                if root.wanted or now >= root.next_run:
                    root.busy = True
                    root.wanted = root.regroup = False
                    due.append((root, self.run_root))
                elif root.regroup:
                    root.busy = True
                    root.regroup = False
                    due.append((root, self._regroup))
        self.builder.expect(root for root, job in due if job == self.run_root)
        for root, job in due:
            self.pool.submit(self._run_guarded, root, job)

    def _regroup(self, root: Root) -> None:
        """Shard 0's Ready written again from its last outcome: another shard's entry
        changed."""
        if root.outcome is not None:
            self._report(root, root.outcome, warn=root.outcome.ready == "False")

    def _run_guarded(self, root: Root, job: Callable[[Root], None]) -> None:
        try:
            job(root)
        except LeadershipLost as err:
            log.error("Sync %s: abandoned: %s", root.key, err)
        except Exception:  # a bug must not end the worker: logged, retried at its interval
            log.exception("Sync %s: unexpected error", root.key)
            root.next_run = time.monotonic() + 60.0
        finally:
            with self.wake:
                root.busy = False
                root.deadline = None
                self.wake.notify_all()

    def run_root(self, root: Root) -> None:
        """One look at one Sync, in a worker of the pool."""
        obj, spec = root.obj, root.spec
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            failure = finalize(self.kube, self.builder, root)
            if failure is None:  # shard 0 waits for the others' deletions
                root.next_run = time.monotonic() + 2.0
                return
            if not failure and root.shard > 0:  # done: the Sync goes once shard 0 is
                root.next_run = float("inf")
                return
            if failure:
                self._report(root, syncs.Outcome(ready="False", reason=syncs.FAILED,
                                                 message=f"deletion: {failure}"), warn=True)
                root.next_run = time.monotonic() + (root.spec.interval if root.spec else 60.0)
            return
        if root.error is not None or spec is None:
            self.builder.stop(root)
            self._report(root, syncs.Outcome(ready="False", reason=syncs.INVALID,
                                             message=str(root.error)), warn=True)
            root.next_run = float("inf")  # until the spec changes
            return
        if root.duplicate_of:
            self.builder.stop(root)
            self._report(root, syncs.Outcome(
                ready="False", reason=syncs.DUPLICATE,
                message=f"{spec.url} path {spec.path or '.'} is synced by the Sync "
                        f"{root.duplicate_of} already: refused (one inventory per source)"),
                warn=True)
            root.next_run = float("inf")
            return
        if syncs.FINALIZER not in (meta.get("finalizers") or []):
            if root.shard > 0:  # shard 0 adds it: nothing is applied before it is there
                root.next_run = time.monotonic() + 2.0
                return
            add_finalizer(self.kube, root)
        if spec.suspend:
            self.builder.stop(root)
            ready = str(syncs.ready_condition(obj).get("status"))
            self._report(root, syncs.Outcome(
                ready=ready if ready in ("True", "False") else "False", reason=syncs.SUSPENDED,
                message="suspended: nothing is applied (no poll, webhook, drift repair or "
                        "prune) until it is resumed"))
            root.next_run = float("inf")
            return
        self._sync(root, spec)

    def _sync(self, root: Root, spec: syncs.SyncSpec) -> None:
        try:
            agent = self.builder.agent(root, spec)
        except InputError as err:  # a Secret it names, or an inventory it may not adopt
            reason = syncs.SERVICE_ACCOUNT if err.path in (
                "spec.serviceAccountName", "--default-service-account") else \
                syncs.SECRET if err.path.startswith("spec.") else syncs.INVALID
            self._report(root, syncs.Outcome(ready="False", reason=reason,
                                             message=str(err)), warn=True)
            root.next_run = time.monotonic() + spec.interval
            return
        requested = reconcile_requested(root.obj)
        handled = str((root.obj.get("status") or {}).get("lastHandledReconcileAt") or "")
        if requested and requested != handled:
            agent.state.next_attempt = 0.0  # a reconcile request skips the backoff
        if not root.written and not (root.obj.get("status") or {}).get("conditions"):
            self._report(root, syncs.Outcome(ready="Unknown", reason=syncs.PROGRESSING,
                                             message="first sync running"))
        def started(sha: str) -> None:  # Reconciling=True while any of its syncs runs
            self._report(root, syncs.Outcome(
                ready="Unknown", reason=syncs.PROGRESSING,
                message=f"reconciling revision {spec.wanted}@sha1:{sha}"))

        agent.on_sync_started = started
        held = False

        def may_sync(sha: str) -> bool:  # shard I > 0: after shard 0 tried the revision
            nonlocal held
            held = root.shard > 0 and attempted(root.obj) != sha
            if held:
                self._report(root, syncs.Outcome(
                    ready="Unknown", reason=syncs.PROGRESSING,
                    message=f"revision {sha}: waiting for shard 0 to apply it first (the "
                            "CRDs and plain manifests are its)"))
            return not held

        agent.may_sync = may_sync
        before = agent.state.changes
        root.deadline = time.monotonic() + spec.timeout
        try:
            agent.sync_job()
        finally:
            root.deadline = None
        if time.monotonic() >= root.next_rotate:
            root.next_rotate = time.monotonic() + self.config.base.rotate_interval
            agent.rotate_job()
        root.next_run = max(time.monotonic() + spec.interval * random.uniform(1.0, 1.05),
                            agent.state.next_attempt)
        if held:  # and at once when shard 0's status names a new revision (`_update`)
            root.next_run = min(root.next_run, time.monotonic() + 5.0)
        outcome = run_outcome(root, agent, spec, ran=agent.state.changes is not before,
                              requested=requested)
        if outcome is not None:
            self._report(root, outcome, warn=outcome.ready == "False")

    def _gate(self, root: Root) -> float | None:
        left: float | None = None
        if self.membership is not None:
            left = self.membership.check(root.key)
        if self.elector is not None:
            left = self.elector.check()
        deadline = root.deadline
        if deadline is not None and time.monotonic() > deadline and root.spec is not None:
            raise SyncTimeout(f"the sync passed its timeout of {root.spec.timeout:.0f}s: "
                              "abandoned, retried with backoff", subject=f"Sync/{root.key}")
        return left

    def _wake(self, root: Root) -> None:
        with self.wake:
            root.wanted = True
            self.wake.notify_all()

    def _inventories(self) -> set[str]:
        with self.lock:
            return {r.inventory for r in self.roots.values() if r.spec is not None}

    def _report(self, root: Root, outcome: syncs.Outcome, *, warn: bool = False) -> None:
        report(self.kube, root, outcome, identity=self.config.base.identity, warn=warn)

    # --- webhooks ------------------------------------------------------------------------

    def handle_hook(self, namespace: str, name: str, headers: webhook.Headers, body: bytes,
                    client: str) -> webhook.Verdict:
        """POST /hooks/git/<namespace>/<name>: verified with that Sync's webhook Secret,
        then a run of that Sync now."""
        key = f"{namespace}/{name}"
        with self.lock:  # a Sync of several shards: shard 0's server verifies the hook
            root = self.roots.get(key) or self.roots.get(f"{key}{syncs.UNIT_SEPARATOR}0")
            spec = root.spec if root is not None else None
        if root is None or spec is None or not spec.webhook_secret:
            return webhook.Verdict(404, "no such Sync with a webhook")
        key = root.key
        if self.membership is not None and not self.membership.serves(key):
            # the caller retries at the replica named (its Service reaches any replica)
            owner = self.membership.holder(key) or self.membership.owner(key)
            return webhook.Verdict(421, f"the Sync {key} is served by the replica "
                                        f"{owner or '(none yet)'}, not by "
                                        f"{self.membership.identity}")
        if not self.is_leader() or not self.mine(key):  # its Secret is read by its server
            return webhook.Verdict(503, "standby: this replica does not serve this Sync")
        verdict = synchook.verify(self.kube, self.metrics, spec, key, headers, body, client)
        if not verdict.accepted or spec.suspend:
            return verdict if not verdict.accepted else webhook.Verdict(
                409, "the Sync is suspended")
        log.info("webhook for Sync %s (%s): fetching now", key, verdict.provider)
        with self.wake:
            root.wanted = True
            if root.agent is not None:
                root.agent.state.next_attempt = 0.0
            self.wake.notify_all()
        if spec.shards > 1:  # the other shards' servers see it on the Sync and fetch too
            synchook.tell_shards(self.kube, root.obj, key)
        return verdict

    # --- readiness and lifecycle ---------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
        if self.membership is not None and self.membership.waiting:
            return True, f"standby: {self.membership.waiting}"
        if self.membership is not None and not self.membership.member.leading:
            return False, f"not a member: {self.membership.member.standby_reason}"
        if self.elector is not None and not self.elector.leading:
            return True, "standby: another replica holds the lease"
        if self.informer is None or not self.informer.synced.is_set():
            return False, "the Syncs have not been listed yet"
        with self.lock:
            count = len(self.roots)
        if self.membership is not None:
            return True, (f"ok: {len(self.membership.held())} of {count} Sync(s) served "
                          f"here, {len(self.membership.live())} replica(s) live")
        return True, f"ok: {count} Sync(s)"

    def ui_roots(self) -> list[RootStatus]:
        """The Syncs as the web view shows them: a user sees one when they may get it."""
        with self.lock:  # a Sync of several shards: a root each
            roots = [(r.spec, r.obj, r.shard) for r in self.roots.values() if r.spec is not None]
        return sorted((ui_status(spec, obj, shard) for spec, obj, shard in roots),
                      key=lambda r: r.name)

    def run(self) -> int:
        base = self.config.base
        base.state_dir.mkdir(parents=True, exist_ok=True)
        if self.elector is not None:
            ensure_namespace(self.elector.kube, base.lease_namespace)
        if self.membership is not None:
            ensure_namespace(self.membership.kube, base.lease_namespace)
        mounts = {}
        if base.ui:
            from orksync.agent.ui.app import PREFIX, WebView

            # its own connections, ungated: a standby serves the view too
            view = WebView(self.kube.sibling(timeout=10.0, retry=RetryPolicy(attempts=2),
                                             pool_size=4),
                           self.journal, self.ui_roots, base.inventory_namespace)
            mounts[PREFIX] = view.handle
        server = serve(base.listen, self.metrics.registry, self.ready,
                       sync_hook=self.handle_hook, mounts=mounts)
        log.info("agent %s: serving the Syncs of %s; listening on %s", base.identity,
                 f"namespace {self.config.watch_namespace}" if self.config.watch_namespace
                 else "every namespace",
                 f"{server.server_address[0]!s}:{server.server_address[1]}")
        received: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, _: received.append(signum))
        try:
            self.watch_kube.resource(syncs.API_VERSION, syncs.KIND)
        except ClusterError as err:  # its watch keeps trying: the CRD may come later
            log.error("the Sync CRD (syncs.orksync.io) is not served, no Sync can be read "
                      "until it is (kubectl apply -f deploy/base/sync.crd.yaml): %s", err)
        self.informer = Informer(self.watch_kube, (syncs.API_VERSION, syncs.KIND),
                                 on_event=self._on_event).start()
        elector_thread = self.elector.start(self.stop_event) if self.elector else None
        threads: list[threading.Thread] = []
        if self.membership is not None:
            threads.append(self.membership.start(self.stop_event))
            threads.append(threading.Thread(target=self._rebalance_loop, name="scale-out",
                                            daemon=True))
            threads[-1].start()
        while not received and not self.stop_event.is_set():
            self.dispatch()
            with self.wake:
                self.wake.wait(0.2)
        self.stop_event.set()
        log.info("agent: stopping (finishing the running syncs)")
        self.informer.stop()
        self.pool.shutdown(wait=True, cancel_futures=True)
        with self.lock:
            roots = list(self.roots.values())
        for root in roots:
            self.builder.stop(root)
        self.shared.stop()
        if elector_thread is not None:
            elector_thread.join()
        for thread in threads:
            thread.join()
        if self.elector is not None:
            self.elector.release()
            self.elector.kube.close()
        if self.membership is not None:  # the claims first: a successor starts at once
            for key in self.membership.held():
                self.membership.release(key)
            self.membership.member.release()
            self.membership.kube.close()
        server.shutdown()
        self.watch_kube.close()
        self.kube.close()
        log.info("agent: stopped")
        return 0

"""The controller of the Sync objects: `orksync agent` without --repo-url
(docs/operations.md, "Sync objects").

Each Sync is a sync root of its own: an `Agent` (orksync.agent.runner) with the Sync's
settings, its own inventory (`orksync-inventory-<namespace>.<name>`), checkout and state
directory (`<state dir>/syncs/<namespace>/<name>`), drift repair and scoped syncs, and a
connection of its own whose gate closes when this replica loses the Lease or the Sync's
run passes its `timeout`, and whose writes go as the Sync's ServiceAccount (`_writer`).
The controller owns what is shared: one Lease, one informer of
the Syncs, the HTTP server (per-Sync webhooks at `/hooks/git/<namespace>/<name>`) and a
pool of `--concurrent-syncs` workers. A Sync's runs never overlap; the runs of different
Syncs never wait for each other beyond the pool's size.

What the loop decides for each Sync, from its object:
* being deleted: with `prune: true` everything its inventory holds is deleted (custom
  resources through their onDelete), then its inventory, then the finalizer
  `orksync.io/sync-cleanup`; with `prune: false` only its inventory and the finalizer go;
* a spec that cannot be used, a Secret it names missing, or a second Sync of the same url
  and path (the older one keeps it): Stalled, with the error; nothing is applied and its
  objects are kept;
* suspended: its root is stopped (no poll, webhook, drift repair or prune) and its status
  says so; resumed, it syncs at once;
* otherwise it runs every `interval` (backing off after failures, as the single-root agent
  does), at once after a webhook or a reconcile request (the annotation
  `reconcile.orksync.io/requestedAt`, answered in `status.lastHandledReconcileAt`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import shutil
import signal
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orksync.agent import syncs, webhook
from orksync.agent.lease import LeaderElector
from orksync.agent.membership import Membership
from orksync.agent.metrics import Metrics
from orksync.agent.runner import Agent as SyncAgent
from orksync.agent.runner import AgentConfig
from orksync.agent.server import serve
from orksync.agent.ui.data import RootStatus
from orksync.agent.ui.journal import Journal
from orksync.apply.delete import DeletionOptions
from orksync.apply.engine import ApplyOptions
from orksync.apply.impersonation import Impersonation, service_account_user
from orksync.apply.inventory import configmap_name
from orksync.cluster.kube import Kube
from orksync.cluster.retry import RetryPolicy
from orksync.cluster.transport import USER_AGENT
from orksync.cluster.watch import Informer
from orksync.errors import ClusterError, InputError, LeadershipLost, OrksyncError
from orksync.model import RenderedSet, Source
from orksync.source.git import GitAuth, GitVerify, VerifyMode
from orksync.sync import (
    SyncOptions,
    SyncRequest,
    ensure_namespace,
    hook_renderers,
    read_inventory,
    sync_rendered,
    write_inventory,
)

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


@dataclass(slots=True)
class Root:
    """What the controller knows of one Sync."""

    key: str
    obj: dict[str, Any]
    spec: syncs.SyncSpec | None = None
    error: InputError | None = None  # why the spec cannot be used
    agent: SyncAgent | None = None
    fingerprint: tuple[Any, ...] = ()
    busy: bool = False
    wanted: bool = True  # run at the next look (new, a webhook, a reconcile, a resume)
    next_run: float = 0.0
    next_rotate: float = 0.0
    deadline: float | None = None  # the running job's end (its `timeout`)
    duplicate_of: str = ""
    leaving: bool = False  # handed over: no new run; released once the running one ends
    written: dict[str, Any] = field(default_factory=dict)  # the status last written
    # the Ready condition's status and message before a run set it Unknown: a run that
    # ends as the one before it is no news (no Event)
    settled: tuple[str, str] | None = None


def sync_label(spec: syncs.SyncSpec) -> str:
    """The `orksync.io/shard` value on what a Sync writes: `sync-` and a digest of its
    namespace and name (a label value holds 63 characters, a Sync's key more)."""
    return sync_label_of(spec.key)


def sync_label_of(key: str) -> str:
    """`sync_label` of the Sync whose key is `namespace/name`."""
    import hashlib

    return "sync-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def shard_of(key: str, shards: int) -> int:
    """The static shard of a Sync (`--shards N --shard I`): stable on every replica."""
    import hashlib

    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % shards


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
                                         retry_period=base.retry_period)
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
            self._drop_agent(root, agent)

    # --- scale-out: which replica serves which Sync (membership.py) --------------------

    def _lost_claims(self, keys: set[str]) -> None:
        """Claims lost while this replica's member gate was closed: their roots stop
        (their writes were refused already)."""
        with self.lock:
            lost = [r for k, r in self.roots.items() if k in keys]
        for root in lost:
            self.metrics.handovers.labels(direction="lost").inc()
            self._stop_agent(root)

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
        self._stop_agent(root)
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
        dropped: tuple[Root, SyncAgent] | None = None
        with self.wake:
            if kind == "DELETED":
                root = self.roots.pop(key, None)
                if root is not None and root.agent is not None:
                    dropped = (root, root.agent)
            else:
                root = self.roots.get(key)
                if root is None:
                    root = self.roots[key] = Root(key=key, obj=obj)
                old_meta = root.obj.get("metadata") or {}
                old_request = self._requested(root.obj)
                root.obj = obj
                if meta.get("generation") != old_meta.get("generation") or \
                        meta.get("deletionTimestamp") != old_meta.get("deletionTimestamp") or \
                        self._requested(obj) != old_request or root.spec is None:
                    self._read_spec(root)
                    root.wanted = True
            self._find_duplicates()
            self.wake.notify_all()
        if dropped is not None:
            self._drop_agent(*dropped)

    def _read_spec(self, root: Root) -> None:
        try:
            root.spec, root.error = syncs.parse_spec(
                root.obj, allow_file_urls=self.config.allow_file_urls), None
        except InputError as err:
            root.spec, root.error = None, err

    def _find_duplicates(self) -> None:
        """A second Sync of the same url and path is refused; the oldest keeps it."""
        owners: dict[tuple[str, str], str] = {}
        order = sorted(self.roots.values(), key=lambda r: (
            str((r.obj.get("metadata") or {}).get("creationTimestamp") or ""), r.key))
        for root in order:
            root.duplicate_of = ""
            if root.spec is None or (root.obj.get("metadata") or {}).get("deletionTimestamp"):
                continue
            source = (root.spec.url.rstrip("/").removesuffix(".git"), root.spec.path)
            if source in owners:
                root.duplicate_of = owners[source]
            else:
                owners[source] = root.key

    @staticmethod
    def _requested(obj: Mapping[str, Any]) -> str:
        return str(((obj.get("metadata") or {}).get("annotations") or {}).get(
            syncs.RECONCILE_ANNOTATION) or "")

    # --- the loop ------------------------------------------------------------------------

    def dispatch(self) -> None:
        """Hand every Sync with work due to the pool (one run per Sync at a time)."""
        if not self.is_leader():
            return
        now = time.monotonic()
        due: list[Root] = []
        with self.lock:
            for root in self.roots.values():
                if root.busy or root.leaving or not self.mine(root.key):
                    continue
                if root.wanted or now >= root.next_run:
                    root.busy = True
                    root.wanted = False
                    due.append(root)
        for root in due:
            self.pool.submit(self._run_guarded, root)

    def _run_guarded(self, root: Root) -> None:
        try:
            self.run_root(root)
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
            self._finalize(root)
            return
        if root.error is not None or spec is None:
            self._stop_agent(root)
            self._report(root, syncs.Outcome(ready="False", reason=syncs.INVALID,
                                             message=str(root.error)), warn=True)
            root.next_run = float("inf")  # until the spec changes
            return
        if root.duplicate_of:
            self._stop_agent(root)
            self._report(root, syncs.Outcome(
                ready="False", reason=syncs.DUPLICATE,
                message=f"{spec.url} path {spec.path or '.'} is synced by the Sync "
                        f"{root.duplicate_of} already: refused (one inventory per source)"),
                warn=True)
            root.next_run = float("inf")
            return
        if syncs.FINALIZER not in (meta.get("finalizers") or []):
            self._add_finalizer(root)
        if spec.suspend:
            self._stop_agent(root)
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
            agent = self._agent(root, spec)
        except InputError as err:  # a Secret it names, or an inventory it may not adopt
            reason = syncs.SERVICE_ACCOUNT if err.path in (
                "spec.serviceAccountName", "--default-service-account") else \
                syncs.SECRET if err.path.startswith("spec.") else syncs.INVALID
            self._report(root, syncs.Outcome(ready="False", reason=reason,
                                             message=str(err)), warn=True)
            root.next_run = time.monotonic() + spec.interval
            return
        requested = self._requested(root.obj)
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
        state = agent.state
        sha = state.revision.sha if state.revision is not None else ""
        ran = state.changes is not before
        objects = len(state.inventory.value) if state.inventory is not None else None
        counts: dict[str, int] | None = None
        if state.changes is not None:
            counts = {}
            for change in state.changes.changes:
                counts[change.action.value] = counts.get(change.action.value, 0) + 1
        if state.failures:
            message = self._failure(agent)
            reason = syncs.TIMEOUT if "passed its timeout" in message else syncs.FAILED
            outcome = syncs.Outcome(ready="False", reason=reason, message=message,
                                    attempted=sha, counts=counts, objects=objects,
                                    new_revision=ran and self._new(root, sha, "failed"),
                                    handled=requested or None)
        elif state.synced_once:
            outcome = syncs.Outcome(
                ready="True", reason=syncs.SUCCEEDED,
                message=f"applied revision {spec.wanted}@sha1:{sha}", attempted=sha,
                applied=sha, counts=counts, objects=objects,
                new_revision=ran and self._new(root, sha, "succeeded"),
                handled=requested or None)
        else:
            return
        self._report(root, outcome, warn=outcome.ready == "False")

    @staticmethod
    def _new(root: Root, sha: str, result: str) -> bool:
        """Whether a run of `sha` is a history entry: a revision not the newest one there,
        or the newest with another result."""
        history = (root.obj.get("status") or {}).get("history") or []
        return not history or history[0].get("revision") != sha or \
            history[0].get("result") != result

    @staticmethod
    def _failure(agent: SyncAgent) -> str:
        """The run's errors: the render's (each naming its file and line) and the failed
        objects', the first few of each."""
        state = agent.state
        lines: list[str] = []
        if state.rendered is not None:
            lines += [str(e) for e in state.rendered.errors[:3]]
            more = len(state.rendered.errors) - 3
            if more > 0:
                lines.append(f"and {more} more render error(s)")
        if state.changes is not None:
            failed = state.changes.failed
            lines += [f"{c.ref}: {c.message}" for c in failed[:3]]
            if len(failed) > 3:
                lines.append(f"and {len(failed) - 3} more failed object(s)")
        if not lines or state.source_error:
            lines.insert(0, state.last_error or "sync failed")
        return "; ".join(dict.fromkeys(lines))

    # --- a root --------------------------------------------------------------------------

    def state_dir(self, spec: syncs.SyncSpec) -> Path:
        return self.config.base.state_dir / "syncs" / spec.namespace / spec.name

    def _agent(self, root: Root, spec: syncs.SyncSpec) -> SyncAgent:
        """The Sync's root, made again when what it is built from changed; its credentials
        read from the Sync's namespace into files of its state directory."""
        fingerprint = spec.source_fingerprint()
        if root.agent is not None and root.fingerprint == fingerprint:
            if root.agent.state.source_error:  # the credentials may have been rotated
                self._credentials(spec)
            root.agent.config = dataclasses.replace(
                root.agent.config, interval=spec.interval)
            return root.agent
        self._stop_agent(root)
        account = self._account(spec)
        auth, verify = self._credentials(spec)
        base = self.config.base
        if base.adopt_inventory:
            self._adopt(root, spec)
        config = dataclasses.replace(
            base, repo_url=spec.url, ref=spec.ref, semver=spec.semver, path=spec.path,
            interval=spec.interval,
            resync_interval=spec.resync_interval, state_dir=self.state_dir(spec),
            leader_elect=False, name=spec.inventory_name, auth=auth, verify=verify,
            webhook_secret_file=None, shards=1, shard=0, prune=spec.prune,
            default_service_account=account)
        # every Sync's requests share the controller's pool: idle connections are kept
        # once for the agent, not for each of its Syncs (the watches' streams each have
        # their own connection anyway)
        own = self.kube.sibling(timeout=self.kube.timeout, retry=self.kube.retry,
                                share_pool=True)
        own.user_agent = self.kube.user_agent
        own.gate = lambda: self._gate(root)
        agent = SyncAgent(config, self._writer(own, account), Metrics())
        agent.journal = self.journal  # keyed by root: one for the web view of every Sync
        config.state_dir.mkdir(parents=True, exist_ok=True)

        def woken(job: str) -> None:
            with self.wake:
                root.wanted = True
                self.wake.notify_all()

        agent.on_wake = woken
        # its objects carry a label of their own (the shard label of a one-shard root),
        # so that its watches hold its objects only, not those of every Sync
        agent.shard_label = agent.rotate_shard = sync_label(spec)
        if config.repair_workers > 0:
            agent.drift = agent.drift_repair(self.kube.sibling(
                timeout=30.0, retry=RetryPolicy(), share_pool=True))
        root.agent, root.fingerprint = agent, fingerprint
        log.info("Sync %s: serving %s@%s path %s as inventory %s", root.key, spec.url,
                 spec.wanted, spec.path or ".", configmap_name(spec.inventory_name))
        return agent

    def _account(self, spec: syncs.SyncSpec) -> str:
        """`namespace/name` of the ServiceAccount the Sync writes as: its
        serviceAccountName, else --default-service-account, in the Sync's namespace; ""
        (neither given) for the agent's own identity. InputError when it does not exist:
        the Sync is Stalled rather than written as a user nobody granted anything."""
        name = spec.service_account or self.config.base.default_service_account
        if not name:
            return ""
        field = "spec.serviceAccountName" if spec.service_account else \
            "--default-service-account"
        try:
            found = self.kube.get_or_none(self.kube.resource("v1", "ServiceAccount"),
                                          spec.namespace, name)
        except ClusterError as err:
            raise InputError(f"ServiceAccount {spec.namespace}/{name} cannot be read: "
                             f"{err.detail}", path=field) from None
        if found is None:
            raise InputError(f"ServiceAccount {spec.namespace}/{name} not found: nothing "
                             "is written until it exists (a Sync writes as a ServiceAccount "
                             "of its own namespace)", path=field)
        return f"{spec.namespace}/{name}"

    @staticmethod
    def _writer(kube: Kube, account: str) -> Kube:
        """The connection of a Sync's root: every write (its CRDs, custom resources, plain
        manifests, children, Secrets, prune and onDelete) sent as `account`, so that the
        cluster's RBAC decides what the Sync's repository may do; reads, and the
        bookkeeping written through `Kube.own` (the inventory, the sync result, the
        custom resources' status), as the agent. InputError when the kubeconfig
        impersonates already."""
        if not account:
            return kube
        try:
            return kube.impersonating(service_account_user(account), writes_only=True)
        except ClusterError as err:  # the kubeconfig impersonates already (`as:`)
            raise InputError(err.detail, path="spec.serviceAccountName") from None

    def _adopt(self, root: Root, spec: syncs.SyncSpec) -> None:
        """The inventory the Sync's annotation `orksync.io/adopt-inventory` names, moved to
        the Sync's own (its source now the Sync's), when the Sync has none yet: what
        `orksync sync --name N` or a `--repo-url` agent recorded is then the Sync's to
        prune. An inventory of another Sync is never taken."""
        name = str(((root.obj.get("metadata") or {}).get("annotations") or {}).get(
            syncs.ADOPT_ANNOTATION) or "")
        namespace = self.config.base.inventory_namespace
        if not name or name == spec.inventory_name:
            return
        with self.lock:
            others = {r.spec.inventory_name for r in self.roots.values()
                      if r.spec is not None}
        if name in others:
            raise InputError(f"{name!r} is the inventory of another Sync: not adopted",
                             path=f"metadata.annotations[{syncs.ADOPT_ANNOTATION}]")
        res = self.kube.resource("v1", "ConfigMap")
        if self.kube.get_or_none(res, namespace, configmap_name(spec.inventory_name)):
            return  # adopted before, or synced already
        if self.kube.get_or_none(res, namespace, configmap_name(name)) is None:
            return
        adopted = read_inventory(self.kube, name, namespace)
        write_inventory(self.kube, adopted.with_source(Source.of(spec.url, spec.path)),
                        spec.inventory_name, namespace)
        self.kube.delete(res, namespace, configmap_name(name))
        log.info("Sync %s: took over the inventory %s (%d object(s), from %s)", root.key,
                 configmap_name(name), len(adopted), adopted.source)

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

    def _credentials(self, spec: syncs.SyncSpec) -> tuple[GitAuth, GitVerify | None]:
        """The Secrets the Sync names, read in its own namespace, as files only the agent
        reads; their values reach no message."""
        directory = self.state_dir(spec) / "credentials"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)

        def put(name: str, value: bytes | None) -> Path | None:
            path = directory / name
            if value is None:
                path.unlink(missing_ok=True)
                return None
            tmp = path.with_suffix(".tmp")
            tmp.touch(mode=0o600)
            tmp.write_bytes(value)
            tmp.replace(path)
            return path

        data: dict[str, bytes] = {}
        if spec.secret:
            data = syncs.read_secret(self.kube, spec.namespace, spec.secret, "spec.secretRef")
        auth = GitAuth(username_file=put("username", data.get("username")),
                       password_file=put("password", data.get("password")),
                       ssh_key_file=put("identity", data.get("identity")),
                       known_hosts_file=put("known_hosts", data.get("known_hosts")))
        verify = None
        if spec.verify_provider:
            signers = syncs.read_secret(self.kube, spec.namespace, spec.verify_secret,
                                        "spec.verify.secretRef")
            if spec.verify_provider == "ssh":
                verify = GitVerify(mode=VerifyMode.SSH, allowed_signers_file=put(
                    "allowed_signers", signers.get("allowed_signers", b"")))
            else:
                verify = GitVerify(mode=VerifyMode.GPG,
                                   keyring=put("keyring", signers.get("keyring", b"")))
        return auth, verify

    def _stop_agent(self, root: Root) -> None:
        agent, root.agent, root.fingerprint = root.agent, None, ()
        if agent is not None:
            self._drop_agent(root, agent)

    @staticmethod
    def _drop_agent(root: Root, agent: SyncAgent) -> None:
        """Stop a root's drift repair and close its connections."""
        if root.agent is agent:
            root.agent, root.fingerprint = None, ()
        agent.stop_event.set()
        agent.copied()
        if agent.drift is not None:
            agent.drift.stop()
            agent.drift.view_kube.close()
            agent.drift = None
        agent.kube.close()

    # --- status --------------------------------------------------------------------------

    def _report(self, root: Root, outcome: syncs.Outcome, *, warn: bool = False) -> None:
        """The Sync's status when it changed, and an Event for a new revision or a new
        failure."""
        inventory = configmap_name(root.spec.inventory_name) if root.spec else ""
        status = {**syncs.status_of(root.obj, outcome, inventory=inventory),
                  "servedBy": self.config.base.identity}
        old = root.obj.get("status") or {}
        if syncs.same_status(old, status):
            return
        try:
            live = syncs.write_status(self.kube, root.obj, status)
        except ClusterError as err:
            if err.status == 404:
                return
            log.error("Sync %s: status not written: %s", root.key, err)
            return
        if isinstance(live, dict):
            root.obj = live
        root.written = status
        old_ready: Mapping[str, Any] = next(
            (c for c in old.get("conditions") or [] if c.get("type") == "Ready"), {})
        before = (str(old_ready.get("status")), str(old_ready.get("message")))
        if before[0] == "Unknown" and root.settled is not None:
            before = root.settled  # what it said before this run began
        if outcome.ready != "Unknown":
            root.settled = (outcome.ready, outcome.message)
        elif before[0] != "Unknown":
            root.settled = before
        changed = before != (outcome.ready, outcome.message)
        if outcome.new_revision or (changed and outcome.ready != "Unknown"):
            self._log_outcome(root, outcome)
            syncs.event(self.kube, root.obj, reason=outcome.reason, message=outcome.message,
                        revision=outcome.attempted, warning=warn)

    @staticmethod
    def _log_outcome(root: Root, outcome: syncs.Outcome) -> None:
        if outcome.ready == "False":
            log.error("Sync %s: %s: %s", root.key, outcome.reason, outcome.message)
        else:
            log.info("Sync %s: %s: %s", root.key, outcome.reason, outcome.message)

    def _add_finalizer(self, root: Root) -> None:
        meta = root.obj.get("metadata") or {}
        finalizers = [*(meta.get("finalizers") or []), syncs.FINALIZER]
        res = syncs.sync_resource(self.kube)
        try:
            live = self.kube.request(
                "PATCH", res.path(str(meta["namespace"]), str(meta["name"])),
                body={"metadata": {"finalizers": finalizers,
                                   "resourceVersion": meta.get("resourceVersion")}},
                content_type="application/merge-patch+json", subject=f"Sync/{root.key}")
        except ClusterError as err:  # changed meanwhile: added at the next run
            log.info("Sync %s: finalizer not added yet: %s", root.key, err)
            return
        if isinstance(live, dict):
            root.obj = live

    # --- deletion ------------------------------------------------------------------------

    def _finalize(self, root: Root) -> None:
        """A deleted Sync: with prune, everything its inventory holds deleted (custom
        resources through their onDelete, the Sync's ServiceAccount as their writer),
        then its inventory and the finalizer; without prune, or suspended (as Flux does),
        only the inventory and the finalizer. A failure keeps the finalizer and is tried
        again."""
        meta = root.obj.get("metadata") or {}
        if syncs.FINALIZER not in (meta.get("finalizers") or []):
            self._stop_agent(root)
            return
        spec = root.spec
        base = self.config.base
        if spec is not None and spec.prune and not spec.suspend:
            try:
                agent: SyncAgent | None = self._agent(root, spec)
            except InputError as err:  # its Secrets gone: no onDelete renderers then
                log.warning("Sync %s: deleting without its repository: %s", root.key, err)
                agent = None
            if agent is not None:
                self._stop_drift(agent)
            failure = self._prune_all(root, agent, spec)
            if failure:
                self._report(root, syncs.Outcome(ready="False", reason=syncs.FAILED,
                                                 message=f"deletion: {failure}"), warn=True)
                root.next_run = time.monotonic() + (spec.interval if spec else 60.0)
                return
        self._stop_agent(root)
        name = spec.inventory_name if spec is not None else \
            f"{meta.get('namespace')}.{meta.get('name')}"
        with contextlib.suppress(ClusterError):  # gone already
            self.kube.delete(self.kube.resource("v1", "ConfigMap"), base.inventory_namespace,
                             configmap_name(name))
        if spec is not None:
            shutil.rmtree(self.state_dir(spec), ignore_errors=True)
        finalizers = [f for f in meta.get("finalizers") or [] if f != syncs.FINALIZER]
        res = syncs.sync_resource(self.kube)
        try:
            self.kube.request(
                "PATCH", res.path(str(meta["namespace"]), str(meta["name"])),
                body={"metadata": {"finalizers": finalizers,
                                   "resourceVersion": meta.get("resourceVersion")}},
                content_type="application/merge-patch+json", subject=f"Sync/{root.key}")
        except ClusterError as err:
            if err.status not in (404, 409):
                raise
            root.wanted = True  # changed meanwhile: look again
        log.info("Sync %s: deleted (%s)", root.key,
                 "its objects pruned" if spec is not None and spec.prune else
                 "its objects left in place")

    @staticmethod
    def _stop_drift(agent: SyncAgent) -> None:
        """No repair may write back what the deletion removes."""
        if agent.drift is not None:
            agent.drift.stop()
            agent.drift.view_kube.close()
            agent.drift = None

    def _prune_all(self, root: Root, agent: SyncAgent | None, spec: syncs.SyncSpec) -> str:
        """An empty render synced: the prune deletes the whole inventory. The error, or
        "" when everything is gone."""
        catalog = agent.state.catalog if agent is not None else None
        if agent is not None:
            kube, account = agent.kube, agent.config.default_service_account
        else:  # its deletes go as its ServiceAccount all the same
            try:
                account = self._account(spec)
                kube = self._writer(self.kube, account)
            except InputError as err:
                return f"{err}; its objects are kept until it exists (or set prune: false)"
        if catalog is None and agent is not None:
            # its onDelete renderers: from the repository, when it answers
            with contextlib.suppress(OrksyncError):
                revision = agent.fetch()
                if revision is not None:
                    from orksync.katalog.loader import load_repository

                    catalog = load_repository(revision.path)
        root.deadline = time.monotonic() + spec.timeout
        try:
            result = sync_rendered(kube, SyncRequest(
                RenderedSet(objects=()), inventory_name=spec.inventory_name,
                inventory_namespace=self.config.base.inventory_namespace,
                hooks=None if catalog is None else hook_renderers(catalog),
                options=SyncOptions(
                    apply=ApplyOptions(workers=self.config.base.workers),
                    deletion=DeletionOptions(wait=True), allow_empty=True,
                    adopt_inventory=True,
                    impersonation=Impersonation.of_catalog(catalog, account)),
                source=Source.of(spec.url, spec.path),
                on_change=lambda change: log.info("Sync %s: %s %s", root.key,
                                                  change.action.value, change.ref)), None)
        except OrksyncError as err:
            return str(err)
        finally:
            root.deadline = None
        if result.changes.failed:
            first = result.changes.failed[0]
            return f"{len(result.changes.failed)} object(s) not deleted: {first.ref}: " \
                f"{first.message}"
        # CRDs stay (deleting one deletes every custom resource of its kind, whoever
        # wrote them), as a prune leaves them without --prune-crds
        left = [e.ref for e in result.inventory if not e.is_crd]
        if left:
            return f"{len(left)} object(s) not deleted yet, {left[0]} first"
        return ""

    # --- webhooks ------------------------------------------------------------------------

    def handle_hook(self, namespace: str, name: str, headers: webhook.Headers, body: bytes,
                    client: str) -> webhook.Verdict:
        """POST /hooks/git/<namespace>/<name>: verified with that Sync's webhook Secret,
        then a run of that Sync now."""
        key = f"{namespace}/{name}"
        with self.lock:
            root = self.roots.get(key)
            spec = root.spec if root is not None else None
        if root is None or spec is None or not spec.webhook_secret:
            return webhook.Verdict(404, "no such Sync with a webhook")
        if self.membership is not None and not self.membership.serves(key):
            # the caller retries at the replica named (its Service reaches any replica)
            owner = self.membership.holder(key) or self.membership.owner(key)
            return webhook.Verdict(421, f"the Sync {key} is served by the replica "
                                        f"{owner or '(none yet)'}, not by "
                                        f"{self.membership.identity}")
        if not self.is_leader() or not self.mine(key):  # its Secret is read by its server
            return webhook.Verdict(503, "standby: this replica does not serve this Sync")
        try:
            data = syncs.read_secret(self.kube, namespace, spec.webhook_secret,
                                     "spec.webhook.secretRef")
        except OrksyncError as err:  # missing, unreadable, or the Lease lost meanwhile
            self.metrics.webhooks.labels(result="error").inc()
            log.error("webhook for Sync %s: %s", key, err)
            return webhook.Verdict(500, "the webhook secret cannot be read")
        token = data.get("token", b"").strip()
        if not token:  # an empty HMAC key is no secret
            log.error("webhook for Sync %s: its Secret %s has no key token", key,
                      spec.webhook_secret)
            return webhook.Verdict(500, "the webhook secret cannot be read")
        verdict = webhook.verify(token, headers, body)
        if verdict.status == 401:
            self.metrics.webhooks.labels(result="refused").inc()
            log.warning("webhook for Sync %s from %s refused: %s", key, client,
                        verdict.message)
            return verdict
        if not verdict.accepted:
            self.metrics.webhooks.labels(result="ping").inc()
            return verdict
        self.metrics.webhooks.labels(result="accepted").inc()
        if spec.suspend:
            return webhook.Verdict(409, "the Sync is suspended")
        log.info("webhook for Sync %s (%s): fetching now", key, verdict.provider)
        with self.wake:
            root.wanted = True
            if root.agent is not None:
                root.agent.state.next_attempt = 0.0
            self.wake.notify_all()
        return verdict

    # --- readiness and lifecycle ---------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
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
        with self.lock:
            roots = [(r.spec, r.obj) for r in self.roots.values() if r.spec is not None]
        shown = []
        for spec, obj in roots:
            status = obj.get("status") or {}
            ready: dict[str, Any] = next((c for c in status.get("conditions") or []
                                          if c.get("type") == "Ready"), {})
            shown.append(RootStatus(
                name=spec.inventory_name,
                source=f"{spec.url}@{spec.ref}" + (f" ({spec.path})" if spec.path else ""),
                revision=str(status.get("lastAppliedRevision") or ""),
                ready=ready.get("status") == "True", message=str(ready.get("message") or ""),
                group=syncs.GROUP, resource="syncs", namespace=spec.namespace,
                object_name=spec.name))
        return sorted(shown, key=lambda r: r.name)

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
            self._stop_agent(root)
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

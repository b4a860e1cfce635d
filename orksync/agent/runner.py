"""The agent: a controller over the sync recipe (docs/operations.md, "What the agent reacts
to").

The sync job runs every interval (with jitter), at once after a webhook, and when this
replica becomes the leader. It fetches the repository; when the revision did not move and
no full sync is due, it does nothing more. A new revision that changes only some custom
resources (orksync.agent.incremental) is a scoped sync of those (orksync.sync.Scope):
rendered against the informers' view, applied, their part of the inventory replaced.
Everything else, and every `resync_interval`, a new leadership or a failure, is a full
sync: the live render of every custom resource (this shard's), apply, teardown, prune,
inventory, status, with the informers instead of LISTs once they are synced. A shard
(`--shards N`) watches only what carries its label (orksync.agent.shard); the first full
sync of each of its leadership terms reads LISTs instead, and then labels what it owns but
wrote without that label (orksync.agent.relabel).

Drift repair (orksync.agent.drift) owns the informers and the work queue: a hand edit
re-applies one custom resource's objects; a child's status, a cross-read custom
resource's status or a time boundary (orksync.render.boundaries) renders one custom
resource again through `reconcile_key`, a scoped sync; a custom resource that left Git
is torn down in its own key. Scoped syncs and the jobs hold one lock, as they share the
inventory; a worker that finds it held leaves its key to be queued again when the lock is
released, so no worker waits.

Leader election (orksync.agent.lease) runs on a thread of its own, with connections of its
own; every request passes its gate (`Kube.gate`), so a leader that could not renew in
time stops writing at once and its running work is abandoned (LeadershipLost). A failed
sync backs off exponentially (interval x 2^failures, at most 15 minutes). SIGTERM lets the
current job finish, releases the lease and stops the HTTP server. An unreachable remote
keeps the last good revision: the agent keeps it and says so in /readyz and the metrics.
Rotation of due Secrets runs on a schedule of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from orksync.agent import webhook
from orksync.agent.drift import DriftRepair, Plan
from orksync.agent.failure import (
    FAILED,
    STALLED,
    SUCCEEDED,
    report_custom_resources,
    report_root,
)
from orksync.agent.incremental import changed_custom_resources, cross_readers
from orksync.agent.lease import LeaderElector
from orksync.agent.metrics import Metrics
from orksync.agent.notify import Notifier, NotifyConfig, notification_counter
from orksync.agent.relabel import block_kinds, label_shard
from orksync.agent.server import serve
from orksync.agent.shard import shard_filter, shard_label, shard_of
from orksync.agent.ui.data import RootStatus
from orksync.agent.ui.journal import Journal
from orksync.apply.delete import DeletionOptions, OnDeleteRenderer
from orksync.apply.engine import ApplyOptions
from orksync.apply.impersonation import Identities, Impersonation
from orksync.apply.inventory import (
    CONFIGMAP_PREFIX,
    Inventory,
    InventoryError,
    inventory_identity,
)
from orksync.apply.secrets import rotate_due
from orksync.cluster.kube import Kube
from orksync.cluster.outage import Outages
from orksync.cluster.retry import RetryPolicy
from orksync.cluster.transport import USER_AGENT
from orksync.cluster.view import WatchedView
from orksync.egress import HttpEgress
from orksync.errors import ClusterError, LeadershipLost, OrksyncError, SourceError
from orksync.katalog.loader import load_repository
from orksync.katalog.model import Catalog, CustomResource
from orksync.katalog.schema import catalog_schema_errors
from orksync.logs import log_change, log_problems, summary_line
from orksync.model import (
    OWNER_ANNOTATION,
    Action,
    Change,
    ChangeSet,
    ObjRef,
    RenderedObject,
    RenderedSet,
    Source,
)
from orksync.render.boundaries import entry_boundary
from orksync.render.engine import CrResult, RenderPlan
from orksync.rendered.directory import write_rendered
from orksync.secrets.random import CryptoRandom
from orksync.source.git import GitAuth, GitSource, GitSourceSpec, GitVerify, Revision
from orksync.sync import (
    Scope,
    SharedInventory,
    SyncOptions,
    SyncRequest,
    ensure_namespace,
    hook_renderers,
    read_inventory,
    render_live,
    sync_rendered,
)

log = logging.getLogger("orksync.agent")

MAX_BACKOFF = 900.0


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    repo_url: str
    ref: str = "main"
    semver: str = ""  # a range replacing `ref`: its highest tag (a Sync's ref.semver)
    path: str = ""
    interval: float = 60.0  # how often the repository is fetched (webhooks: at once)
    # how often everything is rendered and synced although no revision moved (prune and
    # the inventory exact, anything no trigger saw); also at a leadership change
    resync_interval: float = 600.0
    jitter: float = 0.05  # a fraction of the interval
    rotate_interval: float = 3600.0
    state_dir: Path = Path("/var/lib/orksync")
    keep_revisions: int = 5
    listen: str = "0.0.0.0:8080"
    leader_elect: bool = True
    lease_name: str = "orksync"
    lease_namespace: str = "orksync-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    name: str = "default"
    inventory_namespace: str = "orksync-system"
    workers: int = 8
    auth: GitAuth = field(default_factory=GitAuth)
    shard: int = 0
    shards: int = 1
    verify: GitVerify | None = None  # refuse revisions not signed by an allowed key
    strict_cluster_scope: bool = False  # no cluster-scoped kind without an allow-list
    webhook_secret_file: Path | None = None  # POST /hooks/git is served only with one
    allow_empty: bool = False  # an empty render may prune everything (as `sync`'s flag)
    prune_crds: bool = False  # CRDs that left Git are deleted (as `sync`'s flag)
    # the ServiceAccount (in each custom resource's namespace) the children of entries
    # without serviceAccountName are written as; "": the agent (orksync.apply.impersonation)
    default_service_account: str = ""
    repair_workers: int = 4  # drift repair's workers (orksync.agent.drift); 0: none
    ui: bool = True  # the read-only web view on /ui/ (orksync.agent.ui)
    # the commit status and webhook alert of each revision's sync (orksync.agent.notify)
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    adopt_inventory: bool = False  # take over an inventory another source recorded
    prune: bool = True  # False: what left Git is forgotten, not deleted (a Sync's)


@dataclass(slots=True)
class _State:
    revision: Revision | None = None
    catalog: Catalog | None = None
    rendered: RenderedSet | None = None
    said: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # last warnings and errors logged
    failures: int = 0
    next_attempt: float = 0.0
    synced_once: bool = False
    last_error: str = ""
    source_error: str = ""
    full_at: float | None = None  # when the last full sync that succeeded started
    full_wanted: bool = True  # a full sync at the next run of the job (see `full_due`)
    inventory: SharedInventory | None = None  # as the last sync left it
    # the catalog's compiled templates and onDelete renderers, for scoped syncs
    render_plan: RenderPlan | None = None
    hooks: Mapping[tuple[str, str], OnDeleteRenderer] | None = None
    # failures (orksync.agent.failure): the revision the last sync fetched (a new one ends
    # a backoff), the last sync's failure ("" after a success), why it cannot succeed
    # without a change (a refusal: Stalled), and the failure last reported to the cluster
    attempted: str = ""
    failure: str = ""
    stalled: str = ""
    reported: tuple[str, str] | None = None
    said_failure: tuple[str, str] | None = None  # the failure last logged
    unreported_crs: bool = False  # the failed sync wrote no custom resource's status
    foreign: bool = False  # the inventory belongs to another source: nothing written
    own_errors: frozenset[str] = frozenset()  # custom resources whose status names theirs
    # (revision, object, message) of the failed changes logged (`Agent._log_change`)
    said_changes: set[tuple[str, str, str]] = field(default_factory=set)
    changes: ChangeSet | None = None  # of the last sync, full or scoped


def schema_checked(catalog: Catalog, rendered: RenderedSet) -> RenderedSet:
    """The render less what does not fit its CRD's schema, by `orksync validate`'s check
    (orksync.katalog.schema): a custom resource, or a rendered child of a kind the
    repository defines, that the API server would refuse the same way at every try is
    not sent. Each problem becomes an error of the render (file:line, object, field), so
    the sync fails, backs off and prunes nothing, as for any render error; the custom
    resource concerned is held whole (itself and its children: neither applied nor
    pruned), the others are synced."""
    errors = catalog_schema_errors(catalog, rendered.objects)
    if not errors:
        return rendered
    bad = {err.obj for err in errors}
    held = {o.ref if o.owner is None else o.owner for o in rendered.objects
            if str(o.ref) in bad}
    objects = tuple(o for o in rendered.objects
                    if o.ref not in held and o.owner not in held and str(o.ref) not in bad)
    return dataclasses.replace(rendered, objects=objects,
                               errors=(*rendered.errors, *errors))


class Agent:
    def __init__(self, config: AgentConfig, kube: Kube, metrics: Metrics | None = None) -> None:
        self.config = config
        self.kube = kube
        self.metrics = metrics or Metrics()
        self.state = _State()
        self.stop_event = threading.Event()
        self.source = GitSource(GitSourceSpec(url=config.repo_url, ref=config.ref,
                                              semver=config.semver, path=config.path,
                                              auth=config.auth, verify=config.verify),
                                config.state_dir / "checkout")
        self.elector: LeaderElector | None = None
        # an outage (the API server or the Git remote down) is logged once per component
        # when it begins and once when it ends, not at every retry (orksync.cluster.outage)
        self.outages = Outages(log)
        kube.retry_log_level = logging.DEBUG
        if not kube.user_agent:  # the audit log tells the replicas apart by it
            kube.user_agent = f"{USER_AGENT} (agent {config.identity})"
        if config.leader_elect:
            # its own connections and a short timeout; its loop is its retry
            lease_kube = kube.sibling(timeout=max(config.retry_period,
                                                  config.renew_deadline / 2),
                                      retry=RetryPolicy(attempts=1))
            self.elector = LeaderElector(lease_kube, name=config.lease_name,
                                         namespace=config.lease_namespace,
                                         identity=config.identity,
                                         lease_duration=config.lease_duration,
                                         renew_deadline=config.renew_deadline,
                                         retry_period=config.retry_period)
            self.elector.on_started_leading = self._started_leading
            self.elector.on_sync_requested = self._hook_sync
            self.elector.on_stopped_leading = self._stopped_leading
            self.elector.outages = self.outages
            kube.gate = self.elector.check
        self.scheduler: BackgroundScheduler | None = None
        # set by a webhook; a sync that starts clears it, one that ends finds it set when
        # a hook came during it, and runs again at once
        self.sync_wanted = threading.Event()
        if config.webhook_secret_file is not None:
            webhook.read_secret(config.webhook_secret_file)  # refused at start-up if bad
        self.lock = threading.Lock()  # one job touches the cluster at a time
        # drift repair (made by `run`): its own workers, beside the jobs
        self.drift: DriftRepair | None = None
        self._copy: threading.Thread | None = None  # the revision copy being written
        self.hook_at: float | None = None  # when the first hook not yet synced came
        # the catalog and, by custom resource, the keys of those that read it (`dependents`)
        self._readers: tuple[Catalog | None, dict[ObjRef, frozenset[str]]] = (None, {})
        self._keys: tuple[Catalog | None, dict[str, ObjRef]] = (None, {})
        # keys to render again that found a job holding the lock: queued when it ends
        self._deferred: dict[str, str] = {}
        self._deferred_lock = threading.Lock()
        # a shard's `orksync.io/shard` value ("" unsharded), and whether the objects it
        # owns carry it since this leadership term began (`_sync`, orksync.agent.relabel)
        self.shard_label = shard_label(config.shard, config.shards)
        self.labelled = False
        # the `orksync.io/shard` value of the Secrets the rotation scans ("": every
        # managed Secret): a Sync's root rotates its own only
        self.rotate_shard = ""
        # the last syncs and repairs, for the web view (orksync.agent.ui)
        self.journal = Journal()
        # told of each revision's sync: `sync` names the revision it syncs in
        # `notify_revision`, `_sync_job_locked` says how it ended
        self.notifier = Notifier.of(config.notify, root=config.name,
                                    repository=config.repo_url, path=config.path,
                                    counter=notification_counter(self.metrics.registry))
        self.notify_revision = self.notify_message = ""
        # without a scheduler of its own (a Sync's root, orksync.agent.controller), the
        # job this agent wants run now is handed to this
        self.on_wake: Callable[[str], None] | None = None
        # told the revision of each sync that starts (full or scoped; not a poll that
        # found nothing to do): a Sync's Reconciling condition
        self.on_sync_started: Callable[[str], None] | None = None

    # --- readiness -----------------------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
        """/readyz: (ready, why). Not ready while the API server cannot be reached (the
        lease then cannot be renewed) or before the first successful sync; ready but
        saying so while the last sync failed or stalled (the last good revision stays
        applied) or the Git remote cannot be fetched; a standby says who leads."""
        if self.elector is not None and not self.elector.leading:
            if any(o.component == "lease" for o in self.outages.current()):
                return False, f"not leading: {self.elector.standby_reason}"
            return True, f"standby: {self.elector.standby_reason}"
        if not self.state.synced_once:
            why = f": {self.state.last_error}" if self.state.last_error else ""
            return False, f"not synced yet{' (stalled)' if self.state.stalled else ''}{why}"
        unsynced = self.drift.unsynced() if self.drift is not None else []
        if unsynced:
            return False, "the watches of the managed objects have not listed " + ", ".join(
                f"{kind} ({api_version})" for api_version, kind in unsynced)
        said = []
        if self.state.failure:
            said.append(f"{'stalled' if self.state.stalled else 'failing'}: the sync of "
                        f"revision {self.state.attempted[:12]} failed {self.state.failures} "
                        "time(s), next attempt at a new revision or after the backoff: "
                        f"{self.state.failure}")
        if self.state.source_error:
            said.append(f"serving the last good revision: {self.state.source_error}")
        return True, "; ".join(said) or "ok"

    # --- jobs ----------------------------------------------------------------------------

    def is_leader(self) -> bool:
        return self.elector.leading if self.elector is not None else True

    def _started_leading(self) -> None:
        """A new leader syncs at once and checks rotations soon after, not at their next
        interval; its backoff is from before, when another replica may have written."""
        self.metrics.leader.set(1)
        self.state.said = ((), ())
        self.state.full_wanted = True
        self.labelled = False
        self._sync_now()
        self._run_at("rotate", datetime.now(UTC) + timedelta(seconds=5))

    def _stopped_leading(self) -> None:
        self.metrics.leader.set(0)
        if self.drift is not None:
            self.drift.lost_leadership()

    def _hook_sync(self) -> None:
        """A sync now, for a Git webhook (its latency is measured from here)."""
        if self.hook_at is None:
            self.hook_at = time.monotonic()
        self._sync_now()

    def _sync_now(self) -> None:
        """Run the sync job now (its backoff forgotten), or right after the running one."""
        self.state.next_attempt = 0.0
        self.sync_wanted.set()
        self._run_at("sync", datetime.now(UTC))

    def _run_at(self, job: str, when: datetime) -> None:
        if self.scheduler is None and self.on_wake is not None:
            self.on_wake(job)
        if self.scheduler is not None and not self.stop_event.is_set():
            with contextlib.suppress(LookupError):  # the scheduler is shutting down
                self.scheduler.modify_job(job, next_run_time=when)

    def handle_hook(self, headers: webhook.Headers, body: bytes,
                    client: str) -> webhook.Verdict:
        """POST /hooks/git: verified, then a sync now (by the leader, told through the
        Lease when this replica is a standby)."""
        assert self.config.webhook_secret_file is not None
        try:
            secret = webhook.read_secret(self.config.webhook_secret_file)
        except OrksyncError as err:
            self.metrics.webhooks.labels(result="error").inc()
            log.error("webhook: %s", err)
            return webhook.Verdict(500, "the webhook secret cannot be read")
        verdict = webhook.verify(secret, headers, body)
        if verdict.status == 401:
            self.metrics.webhooks.labels(result="refused").inc()
            log.warning("webhook from %s refused: %s", client, verdict.message)
            return verdict
        if not verdict.accepted:
            self.metrics.webhooks.labels(result="ping").inc()
            return verdict
        self.metrics.webhooks.labels(result="accepted").inc()
        if self.is_leader():
            log.info("webhook (%s): fetching now", verdict.provider)
            self._hook_sync()
            return verdict
        assert self.elector is not None
        try:
            self.elector.request_sync()
        except ClusterError as err:
            log.error("webhook (%s): could not pass the request on to the leader: %s",
                      verdict.provider, err)
            return webhook.Verdict(503, "standby: the leader could not be told")
        log.info("webhook (%s): passed on to the leader through the Lease", verdict.provider)
        return webhook.Verdict(202, "fetch requested from the leader", verdict.provider)

    def sync_job(self) -> None:
        """A sync; again at once while webhooks came during the last one (the scheduler
        skips a run asked for while this one runs), whatever its outcome."""
        while self._sync_job() and self.sync_wanted.is_set() and not self.stop_event.is_set():
            self.state.next_attempt = 0.0

    def _sync_job(self) -> bool:
        """One sync, unless this replica is not the leader (then its standby view), is
        stopping or backs off; whether it ran, or the lease came while it did not."""
        if self.stop_event.is_set():
            return False
        if time.monotonic() < self.state.next_attempt and not self._moved_during_backoff():
            return False
        try:
            return self._sync_job_locked()
        finally:
            self._flush_deferred()

    def _sync_job_locked(self) -> bool:
        with self.lock:
            if not self.is_leader():
                self.standby_view()
                # the lease may have come while the view was read: the sync it asked for
                # found this job running, and is run by `sync_job`'s loop
                return self.is_leader()
            self.sync_wanted.clear()
            self.notify_revision = self.notify_message = ""
            start = time.monotonic()
            hook_at, self.hook_at = self.hook_at, None
            try:
                ok = self.sync()
                if ok is None:  # the revision did not move and no full sync is due
                    return True
            except LeadershipLost as err:
                self.metrics.errors.labels(reason="leadership_lost").inc()
                log.error("sync abandoned: %s", err)
                return False
            except OrksyncError as err:
                ok = False
                self.state.full_wanted = True
                self.state.last_error = str(err)
                self.journal.synced(self.config.name, kind="full", ok=False,
                                    revision=self.state.revision.sha
                                    if self.state.revision else "", message=str(err))
                if isinstance(err, InventoryError):  # the inventory is another source's
                    self.state.stalled = str(err)
                self.metrics.errors.labels(reason=type(err).__name__).inc()
                self._failed_early(err)
            # queued, never waited for (orksync.agent.notify)
            self.notifier.finished(self.notify_revision, ok,
                                   self.notify_message or self.state.last_error)
            duration = time.monotonic() - start
            self.metrics.sync_duration.observe(duration)
            self.metrics.reconcile_duration.labels(
                trigger="webhook" if hook_at is not None else "poll").observe(
                time.monotonic() - (hook_at if hook_at is not None else start))
            self.metrics.syncs.labels(result="success" if ok else "failure").inc()
            if ok:
                self._succeeded()
            else:
                self._failed()
            return True

    # --- failures (orksync.agent.failure) -------------------------------------------------

    def _moved_during_backoff(self) -> bool:
        """While a failed sync backs off, the job still fetches at every interval: a
        revision other than the one that failed ends the backoff at once (as a webhook
        does). Whether it did."""
        if not self.is_leader() or not self.state.attempted:
            return False
        revision = self.fetch()
        if revision is None or self.state.source_error or \
                revision.sha == self.state.attempted:  # (the remote down: the last good)
            return False
        log.info("revision %s: new since the failed sync of %s; syncing now, not after "
                 "the backoff", revision.sha[:7], self.state.attempted[:7])
        self.state.next_attempt = 0.0
        return True

    def _log_change(self, change: Change) -> None:
        """A sync's change logged; a failure the same object met with the same message
        at this revision already (a refusal that repeats at every attempt of the backoff)
        only at debug level: once per revision."""
        if change.action is Action.FAILED:
            said = (self.state.attempted, str(change.ref), change.message)
            if said in self.state.said_changes:
                log.debug("failed %s: %s (again)", change.ref, change.message)
                return
            self.state.said_changes.add(said)
        log_change(change, log)

    def _failed_early(self, err: OrksyncError) -> None:
        """A sync that raised: an API server that cannot be reached is an outage of the
        sync (logged when it begins and ends); any other error is logged once per
        revision and message, and reported on the custom resources when the sync wrote
        no status (the revision did not load, or the sync never got to it)."""
        if isinstance(err, ClusterError) and (not err.status or err.status >= 500):
            self.outages.failed("sync", str(err))
            return
        said = (self.state.attempted, str(err))
        if said != self.state.said_failure:
            self.state.said_failure = said
            log.error("sync failed: %s", err)
        self.state.foreign = isinstance(err, InventoryError)
        self.state.unreported_crs = not self.state.foreign  # another source's: not ours
        self.state.own_errors = frozenset()

    def _succeeded(self) -> None:
        self.outages.recovered("sync")
        self.state.failures = 0
        self.state.next_attempt = 0.0
        self.state.failure = self.state.stalled = ""
        self.state.said_failure = None
        self.state.said_changes.clear()
        self.state.foreign = False
        self.metrics.last_success.set(time.time())
        self.metrics.sync_failing.set(0)
        self.metrics.stalled.set(0)
        self.metrics.consecutive_failures.set(0)
        if self.state.reported != ("", ""):  # a failure reported, or not known: cleared
            self._report(SUCCEEDED, "")

    def _failed(self) -> None:
        """Backoff: interval x 2^failures, at most MAX_BACKOFF; a new revision or a
        webhook ends it. A refusal that cannot succeed without a change says Stalled."""
        self.state.failures += 1
        backoff = min(self.config.interval * 2 ** self.state.failures, MAX_BACKOFF)
        self.state.next_attempt = time.monotonic() + backoff
        self.state.failure = self.state.stalled or self.state.last_error
        self.metrics.sync_failing.set(1)
        self.metrics.stalled.set(1 if self.state.stalled else 0)
        self.metrics.consecutive_failures.set(self.state.failures)
        result = STALLED if self.state.stalled else FAILED
        log.info("%s; next attempt at a new revision or in %.0fs (failure %d)",
                 "sync stalled" if self.state.stalled else "sync failed", backoff,
                 self.state.failures)
        self._report(result, self.state.failure)

    def _report(self, result: str, message: str) -> None:
        """The root's sync result, and the custom resources' when the sync wrote no
        status, written to the cluster once per revision and message; a failure to
        write it is logged at debug (the log and /readyz said it already)."""
        key = (self.state.attempted if result != SUCCEEDED else "", message)
        crs, self.state.unreported_crs = self.state.unreported_crs, False
        if key == self.state.reported or self.state.foreign:
            return
        try:
            self.state.reported = key
            report_root(self.kube.own(), name=self.config.name,
                        namespace=self.config.inventory_namespace, result=result,
                        revision=self.state.attempted, message=message)
            if crs and result != SUCCEEDED:
                inventory = read_inventory(self.kube, self.config.name,
                                           self.config.inventory_namespace)
                report_custom_resources(
                    self.kube.own(), [e.ref for e in inventory if e.is_custom_resource and
                                str(e.ref) not in self.state.own_errors],
                    result=result, revision=self.state.attempted, message=message)
        except OrksyncError as err:
            self.state.reported = None
            log.debug("the sync result was not written: %s", err)

    def standby_view(self) -> None:
        """A standby watches the kinds of the stored inventory, so that a takeover
        starts from a current view."""
        if self.drift is None:
            return
        try:
            inventory = read_inventory(self.drift.view_kube, self.config.name,
                                       self.config.inventory_namespace)
        except OrksyncError as err:
            log.debug("standby: cannot read the inventory: %s", err)
            return
        self.drift.watch({(e.ref.api_version, e.ref.kind) for e in inventory})

    def fetch(self) -> Revision | None:
        start = time.monotonic()
        try:
            revision = self.source.fetch()
        except SourceError as err:
            self.metrics.source_up.set(0)
            self.metrics.errors.labels(reason="source").inc()
            self.state.source_error = str(err)
            self.outages.failed("git", f"{err}; keeping revision " + (
                self.state.revision.sha[:7] if self.state.revision else "none"))
            return self.state.revision
        finally:
            self.metrics.fetch_duration.observe(time.monotonic() - start)
        self.metrics.source_up.set(1)
        self.state.source_error = ""
        self.outages.recovered("git")
        return revision

    def full_due(self) -> bool:
        """Whether the next sync renders everything: never synced, asked for (a new
        leader, a failure, a scoped sync that could not decide alone), the resync
        interval has passed since the last full sync, or nothing is watched (no repair
        workers: every interval is a full sync)."""
        return self.drift is None or self.state.full_wanted or self.state.full_at is None or \
            time.monotonic() - self.state.full_at >= self.config.resync_interval

    def sync(self) -> bool | None:
        """Fetch; a full sync when due, a scoped sync of the custom resources a new
        revision changed (orksync.agent.incremental), or nothing (None) when the revision
        did not move. Drift repair holds its events during a full sync and takes its
        applied render as its plan after it."""
        revision = self.fetch()
        if revision is None:
            self.state.last_error = self.state.source_error
            self.journal.synced(self.config.name, kind="fetch", ok=False, revision="",
                                message=self.state.source_error)
            return False
        self.state.attempted = revision.sha
        self.state.stalled = ""
        moved = self.state.catalog is None or self.state.revision is None or \
            revision.sha != self.state.revision.sha
        if not moved and not self.full_due():
            return None
        self.notify_revision = revision.sha
        self.notifier.started(revision.sha)
        if self.on_sync_started is not None:
            self.on_sync_started(revision.sha)
        if moved:
            catalog = load_repository(revision.path)
            scope = None
            if not self.full_due() and self.state.catalog is not None and \
                    self.drift is not None and self.drift.plan() is not None:
                scope = changed_custom_resources(self.state.catalog, catalog)
            self.state.catalog, self.state.revision = catalog, revision
            self.state.render_plan = self.state.hooks = None
            if scope is not None:
                done = self.scoped_sync(scope, revision.sha)
                if done is not None:
                    return done
        if self.drift is None:
            return self._sync(None)
        self.drift.sync_started()
        plan: list[Plan] = []
        try:
            return self._sync(plan)
        finally:
            self.drift.sync_ended(plan[0] if plan else None)

    def _options(self, *, listed: bool = False) -> SyncOptions:
        """`listed`: the apply and the status report read LISTs, not the informers."""
        assert self.state.catalog is not None
        view = live = None
        if self.drift is not None and not listed:  # the informers instead of LISTs
            view, live = self.drift.apply_view, WatchedView(self.drift.informers, self.kube,
                                                            strict=False)
        return SyncOptions(apply=ApplyOptions(workers=self.config.workers),
                           # a teardown waiting for its onDelete Jobs goes on in the work
                           # queue, in its custom resource's key (orksync.agent.drift)
                           deletion=DeletionOptions(wait=self.drift is None),
                           allow_empty=self.config.allow_empty,
                           prune_crds=self.config.prune_crds,
                           impersonation=Impersonation.of_catalog(
                               self.state.catalog, self.config.default_service_account),
                           view=view, live=live, shard=self.shard_label,
                           adopt_inventory=self.config.adopt_inventory,
                           prune=self.config.prune)

    def _mine(self, cr: CustomResource) -> bool:
        return self.config.shards <= 1 or \
            shard_of(cr.ref, self.config.shards) == self.config.shard

    def _sync(self, plan: list[Plan] | None) -> bool:
        revision, catalog = self.state.revision, self.state.catalog
        assert revision is not None and catalog is not None
        started = time.monotonic()
        self.state.full_wanted = False
        # a shard's first full sync of its leadership term reads LISTs, not its view: the
        # objects written before the shard label (or with another N's) are not in the
        # view until `_label_shard` labels them after the apply
        relabel = bool(self.shard_label) and not self.labelled
        rendered = render_live(
            self.kube, catalog, strict_cluster_scope=self.config.strict_cluster_scope,
            live=WatchedView(self.drift.informers, self.kube)
            if self.drift is not None and not relabel else None,
            select=self._mine)
        rendered = schema_checked(catalog if self.config.shards <= 1 else dataclasses.replace(
            catalog, crs=tuple(filter(self._mine, catalog.crs))), rendered)
        said = (rendered.warnings, tuple(map(str, rendered.errors)))
        if said != self.state.said:  # once per revision, and when they change
            log_problems(rendered.warnings, rendered.errors, log)
            self.state.said = said
        full = rendered
        rendered = shard_filter(rendered, self.config.shard, self.config.shards)
        self.state.rendered = rendered
        start = time.monotonic()
        hooks = self._hooks()
        try:
            result = sync_rendered(
                self.kube, SyncRequest(
                    rendered, inventory_name=self.config.name,
                    inventory_namespace=self.config.inventory_namespace, hooks=hooks,
                    options=self._options(listed=relabel),
                    source=Source.of(self.config.repo_url, self.config.path),
                    on_change=self._log_change),
                catalog, revision=revision.sha,
                # status only for this shard's custom resources
                status_of=dataclasses.replace(catalog,
                                              crs=tuple(filter(self._mine, catalog.crs)))
                if self.config.shards > 1 else None)
        finally:
            self._copy_revision(full, revision.sha)  # a failed sync's render too
        self.state.inventory = SharedInventory(result.inventory)
        self.state.changes = result.changes
        if relabel:
            self.labelled = self._label_shard(rendered, result.inventory)
        if plan is not None and result.prepared is not None:
            plan.append(Plan.of(result.prepared, result.inventory, hooks))
        self._schedule_boundaries([cr for cr in catalog.crs if self._mine(cr)])
        for change in result.changes.changes:
            self.metrics.objects.labels(action=change.action.value).inc()
        log.info(summary_line("sync", result.changes, revision=revision.sha,
                              seconds=time.monotonic() - start, errors=len(rendered.errors)))
        self.metrics.revision.clear()
        self.metrics.revision.labels(revision=revision.sha).set(1)
        # a refused prune (an empty render of a root that has objects) is a failed sync:
        # it backs off and is counted and reported as one, Stalled until Git changes
        ok = not rendered.errors and not result.changes.failed and not result.refused_empty
        self.state.synced_once = self.state.synced_once or ok
        if ok:
            self.state.full_at = started
        else:
            self.state.full_wanted = True
        if result.refused_empty:
            self.state.stalled = "; ".join(result.refused) or "the render is empty"
        if not ok:  # the root's custom resources did not reach this revision: said on
            # each, but for those whose status names their own error already
            self.state.unreported_crs = True
            self.state.own_errors = frozenset(
                str(getattr(e, "obj", "")) for e in rendered.errors) | frozenset(
                str(c.ref) for c in result.changes.failed)
        self.state.last_error = "" if ok else self.state.stalled or "; ".join(
            [*(str(e) for e in rendered.errors[:3]),
             *(f"{c.ref}: {c.message}" for c in result.changes.failed[:3])]) or (
            f"{len(rendered.errors)} render error(s), {len(result.changes.failed)} failed")
        # the commit status names the first error, then the counts (orksync.agent.notify)
        first = [str(e) for e in rendered.errors[:1]] + [
            f"{c.ref}: {c.message}" for c in result.changes.failed[:1]]
        self.notify_message = f"{'; '.join(first)} ({self.state.last_error})" if first \
            else self.state.last_error
        self.journal.synced(self.config.name, kind="full", revision=revision.sha, ok=ok,
                            counts=_counts(result.changes.counts()),
                            message=self.state.last_error)
        return ok

    def _label_shard(self, rendered: RenderedSet, inventory: Inventory) -> bool:
        """The shard label on the objects this shard owns (rendered by it now, or in its
        inventory, and its custom resources this render left out, skipped or failing to
        render; and whatever names one of its custom resources as its owner
        (`orksync.io/owner`): their children, a TLS Secret's CA Secret) that lack it: written
        before it existed or by a shard of another N (orksync.agent.relabel); one LIST per
        kind it applies or has in its inventory, or a left-out custom resource's entry
        names; each patched as the identity that writes it. Whether all of them carry it
        now."""
        assert self.state.catalog is not None
        refs = {o.ref for o in rendered.objects} | inventory.refs()
        crs = [cr for cr in self.state.catalog.crs if self._mine(cr)]
        owners = {str(cr.ref) for cr in crs}
        kinds = {(r.api_version, r.kind) for r in refs}
        for cr in crs:  # a custom resource left out: its kind and its blocks' kinds
            if cr.ref not in refs:
                kinds.add((cr.ref.api_version, cr.ref.kind))
                kinds |= block_kinds(cr.entry.operator_box)

        def mine(ref: ObjRef, meta: Mapping[str, Any]) -> bool:
            return ref in refs or str(ref) in owners or \
                (meta.get("annotations") or {}).get(OWNER_ANNOTATION) in owners

        identities = Identities(self.kube, Impersonation.of_catalog(
            self.state.catalog, self.config.default_service_account), rendered.objects,
            recorded=inventory)

        def writer(meta: Mapping[str, Any]) -> Kube:  # as the sync writes it
            owner = (meta.get("annotations") or {}).get(OWNER_ANNOTATION)
            return identities.kube_for_owner(str(owner)) if owner else self.kube

        _, failures = label_shard(self.kube, kinds, mine, self.shard_label, writer)
        for failure in failures:
            log.error("shard %s: %s", self.shard_label, failure)
        return not failures

    # --- scoped syncs --------------------------------------------------------------------

    def scoped_sync(self, refs: frozenset[ObjRef], revision: str) -> bool | None:
        """Render and sync only these custom resources (orksync.sync.Scope) of the
        current catalog: whether it succeeded, or None when it cannot be decided without
        a full sync (a custom resource refused, broken, to be cleaned up or failing to
        render; an object another custom resource owns), which then runs."""
        catalog, drift, shared = self.state.catalog, self.drift, self.state.inventory
        assert catalog is not None and drift is not None
        plan = drift.plan()
        if plan is None or shared is None or (self.shard_label and not self.labelled):
            return None  # (a shard's view lacks what it wrote before its label: `_sync`)
        crs = [cr for cr in catalog.crs if cr.ref in refs and self._mine(cr)]
        if not crs:  # a revision that changed none of this shard's custom resources
            self.metrics.revision.clear()
            self.metrics.revision.labels(revision=revision).set(1)
            return True
        keys = {str(cr.ref) for cr in crs}
        if self.state.render_plan is None:
            self.state.render_plan = RenderPlan(
                catalog, strict_cluster_scope=self.config.strict_cluster_scope)
        render_plan = self.state.render_plan
        merger = render_plan.merger()
        known = len(merger.errors)  # the catalog's own (a full sync reports them)
        live = WatchedView(drift.informers, self.kube)
        egress = HttpEgress()
        objects: list[RenderedObject] = []
        for cr in crs:
            outcome = render_plan.outcome(cr, live, egress)
            # an object another custom resource (or manifest) of the last render owns
            taken = next((c.ref for c in outcome.children
                          if plan.key_of.get(c.ref, str(cr.ref)) not in keys),
                         None) if isinstance(outcome, CrResult) else None
            if taken is not None or not merger.accept(cr, outcome) or \
                    len(merger.errors) > known:
                why = f"{taken} belongs to {plan.key_of[taken]}" if taken is not None else \
                    merger.errors[-1] if len(merger.errors) > known else "left out"
                log.info("%s: cannot be synced alone (%s): a full sync follows", cr.ref, why)
                self.state.full_wanted = True
                return None
            assert isinstance(outcome, CrResult)
            objects.extend((outcome.resource, *outcome.children))
        if catalog_schema_errors(dataclasses.replace(catalog, crs=tuple(crs)), objects):
            log.info("a custom resource does not fit its CRD's schema: a full sync follows "
                     "(it reports it)")
            self.state.full_wanted = True
            return None
        objects.sort(key=lambda o: (o.stage, o.ref))
        rendered = merger.rendered_set(tuple(objects))
        start = time.monotonic()
        drift.hold(keys)
        result = None
        try:
            result = sync_rendered(
                self.kube, SyncRequest(
                    rendered, inventory_name=self.config.name,
                    inventory_namespace=self.config.inventory_namespace, hooks=self._hooks(),
                    options=self._options(),
                    source=Source.of(self.config.repo_url, self.config.path),
                    on_change=self._log_change,
                    scope=Scope(frozenset(cr.ref for cr in crs), shared)),
                catalog, revision=revision,
                status_of=dataclasses.replace(catalog, crs=tuple(crs)))
        finally:
            drift.release(keys, plan.with_part(keys, result.prepared, result.inventory,
                                               self._hooks())
                          if result is not None and result.prepared is not None else None)
        self._schedule_boundaries(crs)
        self.state.changes = result.changes
        for change in result.changes.changes:
            self.metrics.objects.labels(action=change.action.value).inc()
        log.info(summary_line(f"scoped sync of {len(crs)} custom resource(s)", result.changes,
                              revision=revision, seconds=time.monotonic() - start, errors=0))
        self.journal.synced(self.config.name, kind="scoped", revision=revision,
                            ok=not result.changes.failed,
                            counts=_counts(result.changes.counts()),
                            message=f"{len(result.changes.failed)} failed"
                            if result.changes.failed else "")
        self.metrics.revision.clear()
        self.metrics.revision.labels(revision=revision).set(1)
        return not result.changes.failed

    def reconcile_key(self, key: str, trigger: str) -> None:
        """A work-queue key to render again (drift repair's `reconcile`: a status, cross
        or time trigger): its custom resource's scoped sync, beside no other job. A
        scoped sync that cannot decide alone makes the next sync a full one, now."""
        if self.drift is None:
            return
        if not self.lock.acquire(blocking=False):  # a sync runs: this worker stays free
            with self._deferred_lock:
                self._deferred[key] = trigger
            if not self.lock.locked():  # the sync ended meanwhile
                self._flush_deferred()
            return
        try:
            catalog, revision = self.state.catalog, self.state.revision
            if catalog is None or revision is None or not self.is_leader():
                return
            ref = self._refs(catalog).get(key)
            if ref is None:  # left Git: the next full sync prunes it
                return
            log.debug("%s: rendered again (%s)", key, trigger)
            done = self.scoped_sync(frozenset({ref}), revision.sha)
        finally:
            self.lock.release()
            self._flush_deferred()
        if done is None:  # a full sync, unless syncs back off after a failure
            self.state.full_wanted = True
            if time.monotonic() >= self.state.next_attempt:
                self._run_at("sync", datetime.now(UTC))
        elif not done:
            raise ClusterError("scoped sync failed", subject=key)

    def _flush_deferred(self) -> None:
        """The keys that found the lock held, handed back to the work queue."""
        with self._deferred_lock:
            deferred, self._deferred = self._deferred, {}
        if self.drift is not None:
            for key, trigger in deferred.items():
                self.drift.render_again(key, trigger)

    def _hooks(self) -> Mapping[tuple[str, str], OnDeleteRenderer]:
        """The current catalog's onDelete renderers, made once per catalog."""
        assert self.state.catalog is not None
        if self.state.hooks is None:
            self.state.hooks = hook_renderers(self.state.catalog)
        return self.state.hooks

    def _refs(self, catalog: Catalog) -> Mapping[str, ObjRef]:
        """The catalog's custom resources by work-queue key, made once per catalog."""
        if self._keys[0] is not catalog:
            self._keys = (catalog, {str(cr.ref): cr.ref for cr in catalog.crs})
        return self._keys[1]

    def dependents(self, ref: ObjRef) -> set[str]:
        """The keys of the custom resources that read `ref`'s (drift repair's
        `dependents`): its entry's cross readers and dependsOn dependents."""
        catalog = self.state.catalog
        if catalog is None:
            return set()
        if self._readers[0] is not catalog:  # once per catalog
            by_entry: dict[tuple[str, str], set[str]] = {
                entry: {str(r) for r in refs}
                for entry, refs in cross_readers(catalog).items()}
            for c in catalog.crs:
                for name, _ in c.entry.depends_on:
                    by_entry.setdefault((c.entry.katalog, name), set()).add(str(c.ref))
            entries = {cr.ref: (cr.entry.katalog, cr.entry.key) for cr in catalog.crs}
            self._readers = (catalog, {ref: frozenset(by_entry.get(entry, ()))
                                       for ref, entry in entries.items()})
        return set(self._readers[1].get(ref, ())) - {str(ref)}

    def _schedule_boundaries(self, crs: list[CustomResource]) -> None:
        """Each custom resource whose conditions read the clock is rendered again at the
        next instant one of them may change (a time window's edge, a cron fire)."""
        if self.drift is None:
            return
        now = datetime.now(UTC)
        found: dict[tuple[str, str], datetime | None] = {}
        for cr in crs:
            key = (cr.entry.katalog, cr.entry.key)
            if key not in found:
                found[key] = entry_boundary(cr.entry, now)
            when = found[key]
            if when is not None:
                # a little after the instant: a timer may fire early, never late
                self.drift.render_again(str(cr.ref), "time",
                                        delay=max((when - now).total_seconds(), 0.0) + 0.05)

    def _copy_revision(self, rendered: RenderedSet, sha: str) -> None:
        """The revision's first full render to `<state dir>/rendered/<sha>/`, written by a
        thread of its own after the apply: the apply reads the objects in memory, and on a
        slow disk thousands of new files take seconds."""
        self.copied()
        if (self.config.state_dir / "rendered" / sha).exists():
            return
        self._copy = threading.Thread(target=self.write_revision, args=(rendered, sha),
                                      name="orksync-revision-copy", daemon=True)
        self._copy.start()

    def copied(self) -> None:
        """Returns once the revision copy being written, if any, is on disk."""
        if self._copy is not None:
            self._copy.join()
            self._copy = None

    def write_revision(self, rendered: RenderedSet, sha: str) -> None:
        """`<state dir>/rendered/<sha>/`, written atomically; the last N kept, and the
        half-written directories of a process killed while writing one (`.<sha>.tmp-*`,
        `.<sha>.old-*`: this agent writes one copy at a time) removed. The copy is for
        people and tools to read, not for the sync: a failure to write it is logged and
        counted, and the next full sync of the revision tries again."""
        root = self.config.state_dir / "rendered"
        try:
            write_rendered(rendered, root / sha, revision=sha,
                           source=Source.of(self.config.repo_url, self.config.path))
            found = [p for p in root.iterdir() if p.is_dir()]
        except (OSError, OrksyncError) as err:
            self.metrics.errors.labels(reason="revision_copy").inc()
            log.error("the rendered copy of %s was not written: %s", sha, err)
            return
        copies = sorted((p for p in found if not p.name.startswith(".")),
                        key=lambda p: p.stat().st_mtime, reverse=True)
        stale = [p for p in found if p.name.startswith(".") and
                 (".tmp-" in p.name or ".old-" in p.name)]
        for path in [*copies[self.config.keep_revisions:], *stale]:
            shutil.rmtree(path, ignore_errors=True)

    def rotate_job(self) -> None:
        if self.stop_event.is_set():
            return
        try:
            self._rotate()
        finally:
            self._flush_deferred()

    def _rotate(self) -> None:
        with self.lock:
            if not self.is_leader():
                return
            try:
                identities = Identities(
                    self.kube, Impersonation.of_catalog(self.state.catalog,
                                                        self.config.default_service_account),
                    self.state.rendered.objects if self.state.rendered else (),
                    recorded=read_inventory(self.kube, self.config.name,
                                            self.config.inventory_namespace))
                changes = rotate_due(self.kube, now=datetime.now(UTC), random=CryptoRandom(),
                                     writer=identities.kube_for_owner,
                                     shard=self.rotate_shard)
            except LeadershipLost as err:
                self.metrics.errors.labels(reason="leadership_lost").inc()
                log.error("rotation abandoned: %s", err)
                return
            except OrksyncError as err:
                self.metrics.errors.labels(reason="rotate").inc()
                log.error("rotation failed: %s", err)
                return
            for change in changes.changes:
                log_change(change, log)
            # the workloads rolled for a rotated Secret are changes too, not rotations
            self.metrics.rotations.inc(sum(1 for c in changes.changes if c.action is
                                           Action.CONFIGURED and c.ref.kind == "Secret"))

    # --- lifecycle -----------------------------------------------------------------------

    def drift_repair(self, view_kube: Kube | None = None) -> DriftRepair:
        """The informers and the work queue (orksync.agent.drift), on `view_kube` (default:
        connections of their own); the informers select this shard's objects."""
        return DriftRepair(
            self.kube, view_kube or self.kube.sibling(timeout=30.0, retry=RetryPolicy(),
                                                      pool_size=4),
            inventory=inventory_identity(self.config.name, self.config.inventory_namespace),
            workers=self.config.repair_workers, metrics=self.metrics,
            leading=self.is_leader, on_change=self._repaired, reconcile=self.reconcile_key,
            dependents=self.dependents, shard=self.shard_label, on_event=self.journal.touch)

    def _repaired(self, change: Change) -> None:
        log_change(change, log)
        self.journal.repaired(self.config.name, change)

    def ui_roots(self) -> list[RootStatus]:
        """The sync root this agent serves, for the web view; a user sees it when they may
        get its inventory ConfigMap."""
        state = self.state
        applied = next((s.revision for s in self.journal.syncs(self.config.name) if s.ok),
                       "")
        source = f"{self.config.repo_url}@{self.config.ref}" + (
            f" ({self.config.path})" if self.config.path else "")
        ready = state.synced_once and not state.last_error
        message = state.last_error or (f"serving the last good revision: "
                                       f"{state.source_error}" if state.source_error else
                                       "ok" if ready else "not synced yet")
        if not self.is_leader():  # its state is its last term's; the leader's is elsewhere
            ready, message = False, "standby: another replica holds the lease and syncs"
        return [RootStatus(name=self.config.name, source=source, revision=applied,
                           ready=ready, message=message, group="", resource="configmaps",
                           namespace=self.config.inventory_namespace,
                           object_name=f"{CONFIGMAP_PREFIX}{self.config.name}")]

    def run(self) -> int:
        self.config.state_dir.mkdir(parents=True, exist_ok=True)
        if self.elector is not None:  # before leading: through the ungated connection
            ensure_namespace(self.elector.kube, self.config.lease_namespace)
        mounts = {}
        if self.config.ui:
            from orksync.agent.ui.app import PREFIX, WebView

            # its own connections, ungated: a standby serves the view too
            view = WebView(self.kube.sibling(timeout=10.0, retry=RetryPolicy(attempts=2),
                                             pool_size=4),
                           self.journal, self.ui_roots, self.config.inventory_namespace)
            mounts[PREFIX] = view.handle
        server = serve(self.config.listen, self.metrics.registry, self.ready,
                       self.handle_hook if self.config.webhook_secret_file else None,
                       mounts=mounts)
        log.info("agent %s: %s@%s every %.0fs; listening on %s", self.config.identity,
                 self.config.repo_url, self.config.ref, self.config.interval,
                 f"{server.server_address[0]!s}:{server.server_address[1]}")
        scheduler = BackgroundScheduler(timezone="UTC")
        self.scheduler = scheduler
        jitter = max(int(self.config.interval * self.config.jitter), 0) or None
        common: dict[str, Any] = {"max_instances": 1, "coalesce": True}
        scheduler.add_job(self.sync_job, "interval", seconds=self.config.interval,
                          jitter=jitter, next_run_time=datetime.now(UTC), id="sync", **common)
        scheduler.add_job(self.rotate_job, "interval", seconds=self.config.rotate_interval,
                          jitter=max(int(self.config.rotate_interval * 0.05), 1), id="rotate",
                          next_run_time=datetime.now(UTC) + timedelta(seconds=random.uniform(1, 5)),
                          **common)
        received: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            # only a list append: the handler runs in the main thread between any two of its
            # instructions, and setting the Event there could wait on the Event's own lock,
            # held by the main thread at that instant
            signal.signal(sig, lambda signum, _: received.append(signum))
        if self.config.repair_workers > 0:
            self.drift = self.drift_repair()
        scheduler.start()
        elector_thread = self.elector.start(self.stop_event) if self.elector else None
        # polled, not an endless wait: Python runs a handler only when the main thread
        # runs, and a SIGTERM the kernel hands to another thread (the scheduler's, a
        # request's) wakes no endless wait of the main thread
        while not received and not self.stop_event.is_set():
            time.sleep(0.2)
        self.stop_event.set()
        log.info("agent: stopping (finishing the current job)")
        scheduler.shutdown(wait=True)
        self.copied()
        if self.drift is not None:
            self.drift.stop()
            self.drift.view_kube.close()
        if elector_thread is not None:
            elector_thread.join()
        with self.lock:
            if self.elector is not None:
                self.elector.release()
        server.shutdown()
        self.notifier.close()
        if self.elector is not None:
            self.elector.kube.close()
        self.kube.close()
        log.info("agent: stopped")
        return 0


def _counts(counts: Mapping[Action, int]) -> dict[str, int]:
    return {action.value: n for action, n in counts.items()}

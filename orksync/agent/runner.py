"""The agent's loop for one sync root (`orksync agent --repo-url`, and each Sync's root
under orksync.agent.controller): leadership (orksync.agent.lease), the Git webhook, the
schedule of the sync and rotation jobs, backoff after failures, readiness and the
result reported to the cluster. The syncs themselves are the reconciler's
(orksync.agent.reconciler), fetch, rotation and revision copy the jobs'
(orksync.agent.jobs); docs/operations.md, "What the agent reacts to", says when each runs.
"""

from __future__ import annotations

import contextlib
import logging
import random
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from orksync.agent import webhook
from orksync.agent.config import AgentConfig, RootState
from orksync.agent.failure import (
    FAILED,
    STALLED,
    SUCCEEDED,
    report_custom_resources,
    report_root,
)
from orksync.agent.jobs import Jobs
from orksync.agent.lease import LeaderElector
from orksync.agent.metrics import Metrics
from orksync.agent.notify import Notifier, notification_counter
from orksync.agent.reconciler import Reconciler
from orksync.agent.server import serve
from orksync.agent.ui.data import RootStatus
from orksync.agent.ui.journal import Journal
from orksync.apply.inventory import (
    CONFIGMAP_PREFIX,
    InventoryError,
)
from orksync.cluster.kube import Kube
from orksync.cluster.outage import Outages
from orksync.cluster.retry import RetryPolicy
from orksync.cluster.transport import USER_AGENT
from orksync.errors import ClusterError, LeadershipLost, OrksyncError
from orksync.sync import (
    ensure_namespace,
    read_inventory,
)

log = logging.getLogger("orksync.agent")

MAX_BACKOFF = 900.0


class Agent:
    def __init__(self, config: AgentConfig, kube: Kube, metrics: Metrics | None = None,
                 journal: Journal | None = None) -> None:
        self.config = config
        self.kube = kube
        self.metrics = metrics or Metrics()
        self.state = RootState()
        self.stop_event = threading.Event()
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
        self.hook_at: float | None = None  # when the first hook not yet synced came
        # the last syncs and repairs, for the web view (orksync.agent.ui)
        self.journal = journal or Journal()
        self.jobs = Jobs(config, kube, self.metrics, self.state, self.outages)
        self.reconciler = Reconciler(
            config, kube, metrics=self.metrics, state=self.state, jobs=self.jobs,
            journal=self.journal, leading=self.is_leader,
            full_wanted=lambda: self._run_at("sync", datetime.now(UTC)))
        # told of each revision's sync: `sync` names the revision it syncs in
        # `notify_revision`, `_sync_job_locked` says how it ended
        self.notifier = Notifier.of(config.notify, root=config.name,
                                    repository=config.repo_url, path=config.path,
                                    counter=notification_counter(self.metrics.registry))
        self.notify_revision = ""
        # without a scheduler of its own (a Sync's root, orksync.agent.controller), the
        # job this agent wants run now is handed to this
        self.on_wake: Callable[[str], None] | None = None
        # told the revision of each sync that starts (full or scoped; not a poll that
        # found nothing to do): a Sync's Reconciling condition
        self.on_sync_started: Callable[[str], None] | None = None
        # told each revision fetched: False holds its sync (a shard of a Sync waits for
        # shard 0 to have applied the revision's CRDs and plain manifests)
        self.may_sync: Callable[[str], bool] | None = None

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
        drift = self.reconciler.drift
        unsynced = drift.unsynced() if drift is not None else []
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
        self.reconciler.labelled = False
        self._sync_now()
        self._run_at("rotate", datetime.now(UTC) + timedelta(seconds=5))

    def _stopped_leading(self) -> None:
        self.metrics.leader.set(0)
        if self.reconciler.drift is not None:
            self.reconciler.drift.lost_leadership()

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
            self.reconciler.flush_deferred()

    def _sync_job_locked(self) -> bool:
        with self.reconciler.lock:
            if not self.is_leader():
                self.standby_view()
                # the lease may have come while the view was read: the sync it asked for
                # found this job running, and is run by `sync_job`'s loop
                return self.is_leader()
            self.sync_wanted.clear()
            self.notify_revision = self.reconciler.notify_message = ""
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
                                   self.reconciler.notify_message or self.state.last_error)
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
        revision = self.jobs.fetch()
        if revision is None or self.state.source_error or \
                revision.sha == self.state.attempted:  # (the remote down: the last good)
            return False
        log.info("revision %s: new since the failed sync of %s; syncing now, not after "
                 "the backoff", revision.sha[:7], self.state.attempted[:7])
        self.state.next_attempt = 0.0
        return True

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
        drift = self.reconciler.drift
        if drift is None:
            return
        try:
            inventory = read_inventory(drift.view_kube, self.config.name,
                                       self.config.inventory_namespace)
        except OrksyncError as err:
            log.debug("standby: cannot read the inventory: %s", err)
            return
        drift.watch({(e.ref.api_version, e.ref.kind) for e in inventory})

    def sync(self) -> bool | None:
        """Fetch; the reconciler's sync of a new revision or of a due full sync, or
        nothing (None) when the revision did not move."""
        revision = self.jobs.fetch()
        if revision is None:
            self.state.last_error = self.state.source_error
            self.journal.synced(self.config.name, kind="fetch", ok=False, revision="",
                                message=self.state.source_error)
            return False
        if self.may_sync is not None and not self.may_sync(revision.sha):
            return None
        self.state.attempted = revision.sha
        self.state.stalled = ""
        moved = self.state.catalog is None or self.state.revision is None or \
            revision.sha != self.state.revision.sha
        if not moved and not self.reconciler.full_due():
            return None
        self.notify_revision = revision.sha
        self.notifier.started(revision.sha)
        if self.on_sync_started is not None:
            self.on_sync_started(revision.sha)
        return self.reconciler.sync(revision, moved)

    def rotate_job(self) -> None:
        if self.stop_event.is_set():
            return
        try:
            with self.reconciler.lock:
                if self.is_leader():
                    self.jobs.rotate()
        finally:
            self.reconciler.flush_deferred()

    # --- lifecycle -----------------------------------------------------------------------

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
            self.reconciler.drift_repair()
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
        self.jobs.copied()
        self.reconciler.stop_drift()
        if elector_thread is not None:
            elector_thread.join()
        with self.reconciler.lock:
            if self.elector is not None:
                self.elector.release()
        server.shutdown()
        self.notifier.close()
        if self.elector is not None:
            self.elector.kube.close()
        self.kube.close()
        log.info("agent: stopped")
        return 0


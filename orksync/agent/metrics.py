"""The agent's Prometheus metrics, in a registry of their own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.sync_duration = Histogram("orksync_sync_duration_seconds",
                                       "Duration of one sync (fetch, render, apply)",
                                       registry=r, buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120))
        self.objects = Counter("orksync_objects_total", "Objects by action, over all syncs",
                               ["action"], registry=r)
        self.errors = Counter("orksync_errors_total", "Errors by reason", ["reason"],
                              registry=r)
        self.syncs = Counter("orksync_syncs_total", "Syncs by result", ["result"], registry=r)
        self.last_success = Gauge("orksync_last_successful_sync_timestamp_seconds",
                                  "Unix time of the last successful sync", registry=r)
        self.sync_failing = Gauge("orksync_sync_failing",
                                  "1 while the last sync failed (the last good revision "
                                  "stays applied; /readyz says why)", registry=r)
        self.stalled = Gauge("orksync_sync_stalled",
                             "1 while the last sync was refused in a way that cannot "
                             "succeed without a change (retried at a new revision, or "
                             "after the backoff)", registry=r)
        self.consecutive_failures = Gauge("orksync_sync_consecutive_failures",
                                          "Syncs failed in a row (0 after a success)",
                                          registry=r)
        self.revision = Gauge("orksync_last_applied_revision_info",
                              "The revision last applied (label), value 1", ["revision"],
                              registry=r)
        self.fetch_duration = Histogram("orksync_git_fetch_duration_seconds",
                                        "Duration of one git fetch", registry=r)
        self.source_up = Gauge("orksync_source_up", "1 when the git remote answered last time",
                               registry=r)
        self.leader = Gauge("orksync_leader", "1 while this replica holds the lease",
                            registry=r)
        self.webhooks = Counter("orksync_webhooks_total",
                                "Git webhooks by result (accepted, ping, refused, error)",
                                ["result"], registry=r)
        self.rotations = Counter("orksync_rotations_total", "Secrets rotated", registry=r)
        self.reconcile_duration = Histogram(
            "orksync_reconcile_duration_seconds",
            "From a trigger to its reconcile done, by trigger: drift (a managed object "
            "edited or deleted, to its repair), webhook (a Git hook accepted, to its sync "
            "done), poll (a sync of the interval or of a new leader), status (a child's "
            "status changed, to its custom resource rendered again), cross (a custom "
            "resource's status changed, to those that read it rendered again), time (a "
            "time window's or cron condition's boundary passed, to its render)",
            ["trigger"], registry=r, buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60))
        self.queue_depth = Gauge("orksync_queue_depth",
                                 "Keys waiting in the work queue (queued or backing off)",
                                 registry=r)
        self.repairs = Counter("orksync_queue_reconciles_total",
                               "Keys the work queue's workers reconciled, by outcome (ok, "
                               "retry: failed and queued again, abandoned: the lease was "
                               "lost)", ["result"], registry=r)
        self.watch_restarts = Counter("orksync_watch_restarts_total",
                                      "Watches that ended other than by the server's timeout, "
                                      "by reason (gone: listed again; error: reconnected "
                                      "after a backoff)", ["reason"], registry=r)
        self.syncs_served = Gauge("orksync_syncs_served",
                                  "Sync objects this replica serves (holds the claim of)",
                                  registry=r)
        self.handovers = Counter("orksync_handovers_total",
                                 "Syncs handed over, by direction (taken: claimed here; "
                                 "released: given to another replica; lost: a lapse of this "
                                 "replica's member Lease)", ["direction"], registry=r)
        self.unserved = Histogram("orksync_sync_unserved_seconds",
                                  "For each Sync taken over, how long it had no server: from "
                                  "its release, or from its previous server's last member "
                                  "renewal seen", registry=r,
                                  buckets=(0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120))
        self.view_objects = Gauge("orksync_view_objects",
                                  "Managed objects in the watched view (leader and standby)",
                                  registry=r)

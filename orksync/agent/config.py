"""What one sync root is configured with (`AgentConfig`) and what the agent knows of it
between its jobs (`RootState`), shared by the loop (orksync.agent.runner), the jobs
(orksync.agent.jobs) and the reconciler (orksync.agent.reconciler)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orksync.agent.notify import NotifyConfig
from orksync.apply.delete import OnDeleteRenderer
from orksync.katalog.model import Catalog
from orksync.model import ChangeSet, RenderedSet
from orksync.render.engine import RenderPlan
from orksync.source.git import GitAuth, GitVerify, Revision
from orksync.sync import SharedInventory


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
class RootState:
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
    # (revision, object, message) of the failed changes logged (`Reconciler.log_change`)
    said_changes: set[tuple[str, str, str]] = field(default_factory=set)
    changes: ChangeSet | None = None  # of the last sync, full or scoped

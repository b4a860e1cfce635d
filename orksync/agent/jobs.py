"""The jobs of one sync root beside its syncs: the fetch of its repository, the rotation of
its due Secrets, and the copy of each revision's render on disk. Each reports through
the root's metrics and state; when they run, and under which lock, is the loop's
(orksync.agent.runner)."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from datetime import UTC, datetime

from orksync.agent.config import AgentConfig, RootState
from orksync.agent.metrics import Metrics
from orksync.apply.impersonation import Identities, Impersonation
from orksync.apply.secrets import rotate_due
from orksync.cluster.kube import Kube
from orksync.cluster.outage import Outages
from orksync.errors import LeadershipLost, OrksyncError, SourceError
from orksync.model import Action, RenderedSet, Source
from orksync.rendered.directory import write_rendered
from orksync.runtime.logs import log_change
from orksync.secrets.random import CryptoRandom
from orksync.source.git import GitSource, GitSourceSpec, Revision
from orksync.sync import read_inventory

log = logging.getLogger("orksync.agent")


class Jobs:
    def __init__(self, config: AgentConfig, kube: Kube, metrics: Metrics, state: RootState,
                 outages: Outages) -> None:
        self.config = config
        self.kube = kube
        self.metrics = metrics
        self.state = state
        self.outages = outages
        self.source = GitSource(GitSourceSpec(url=config.repo_url, ref=config.ref,
                                              semver=config.semver, path=config.path,
                                              auth=config.auth, verify=config.verify),
                                config.state_dir / "checkout")
        # the `orksync.io/shard` value of the Secrets the rotation scans ("": every
        # managed Secret): a Sync's root rotates its own only
        self.rotate_shard = ""
        self._copy: threading.Thread | None = None  # the revision copy being written

    def fetch(self) -> Revision | None:
        """The remote's revision; while it cannot be fetched, the last good one (None
        before the first), said in the state, the metrics and an outage log."""
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

    def rotate(self) -> None:
        """The due Secrets rotated, each written as the identity that wrote it."""
        try:
            identities = Identities(
                self.kube, Impersonation.of_catalog(self.state.catalog,
                                                    self.config.default_service_account),
                self.state.rendered.objects if self.state.rendered else (),
                recorded=read_inventory(self.kube, self.config.name,
                                        self.config.inventory_namespace))
            changes = rotate_due(self.kube, now=datetime.now(UTC), random=CryptoRandom(),
                                 writer=identities.kube_for_owner, shard=self.rotate_shard)
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

    def copy_revision(self, rendered: RenderedSet, sha: str) -> None:
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

"""Drift repair (orksync.agent.drift) on the fake API server: informers LIST and WATCH it,
a hand edit or delete is re-applied under its custom resource's key, what orksync does
not set (another manager's field, a status) and orksync's own writes trigger nothing, and
a standby writes nothing. Repairs are awaited by condition; the counts of writes are the
assertions. The real control plane proves the same in test_drift_cluster.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from orksync.agent.drift import DriftRepair, Plan
from orksync.agent.metrics import Metrics
from orksync.apply.engine import Applier
from orksync.apply.inventory import inventory_identity
from orksync.apply.run import ApplyOptions
from orksync.cluster.kube import Kube
from orksync.katalog.loader import load_repository
from orksync.model import Change, ObjRef, RenderedObject
from orksync.sync import hook_renderers
from tests.fakeapi import FakeApiServer
from tests.fakeapi_fixtures import *  # noqa: F403 - the fixtures kube, repo, server
from tests.fakeapi_fixtures import NS, Repo, ref
from tests.helpers import CRD, katalog, wait_for, widget

KATALOG = katalog("""\
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-one"
              data: {colour: blue}
            - name: "{{ .metadata.name }}-two"
              data: {size: large}
        onCreate:
          configMaps:
            - name: "{{ .metadata.name }}-once"
              data: {kept: "yes"}
""")


class Root:
    """The sync root a DriftRepair writes through (drift.SyncRoot): a repair's apply, as
    the agent's reconciler makes it; no render again, no teardown."""

    def __init__(self, kube: Kube, view: Kube, leading: bool) -> None:
        self.kube, self.is_leading = kube, leading
        self.checker = Applier(view)
        self.changes: list[Change] = []
        self.drift: DriftRepair | None = None

    def leading(self) -> bool:
        return self.is_leading

    def desired(self, obj: RenderedObject, owner_uid: str | None) -> dict[str, Any]:
        return self.checker.desired(obj, owner_uid)

    def applier(self) -> Applier:
        assert self.drift is not None
        return Applier(self.kube, ApplyOptions(workers=2), on_change=self.changes.append,
                       view=self.drift.apply_view)

    def reconcile_key(self, key: str, trigger: str) -> None:
        pass

    def dependents(self, ref: ObjRef) -> set[str]:
        return set()

    def finalize(self, plan: Plan, cr: ObjRef, live: dict[str, Any],
                 sleep: Callable[[float], None]) -> tuple[list[Change], bool]:
        raise AssertionError("no teardown in these tests")

    def repaired(self, change: Change) -> None:
        self.changes.append(change)


class Repair:
    """A DriftRepair on the fake after one sync, with the changes it reported."""

    def __init__(self, repo: Repo, server: FakeApiServer, leading: bool = True) -> None:
        self.repo, self.server = repo, server
        result = repo.sync()
        assert not result.changes.failed, result.changes.failed
        assert result.prepared is not None
        self.view = repo.kube.sibling(timeout=10.0)
        self.root = Root(repo.kube, self.view, leading)
        self.changes = self.root.changes
        self.drift = self.root.drift = DriftRepair(
            self.root, repo.kube, self.view, inventory=inventory_identity(repo.name),
            workers=2, metrics=Metrics())
        self.plan = Plan.of(result.prepared, result.inventory,
                            hook_renderers(load_repository(repo.root)))
        self.drift.sync_started()
        self.drift.sync_ended(self.plan)
        wait_for("the informers listed", lambda: not self.drift.unsynced(), timeout=10)
        server.clear_log()

    def writes(self, name: str = "") -> list[tuple[str, str]]:
        return [(r.verb, r.path) for r in self.server.requests(writes=True)
                if name in r.path]

    def settle(self, check: Callable[[], bool], what: str) -> None:
        """Wait for `check`, then for the queue to empty and the informers to have seen
        every write (a re-apply's own write comes back as an event)."""
        wait_for(what, check, timeout=20)
        wait_for("the queue empty", lambda: len(self.drift.queue) == 0 and
                 not self.drift._written, timeout=20)

    def stop(self) -> None:
        self.drift.stop()
        self.view.close()


@pytest.fixture
def repair(repo: Repo, server: FakeApiServer) -> Iterator[Repair]:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD, "a.yaml": widget("a", NS),
                "b.yaml": widget("b", NS)})
    r = Repair(repo, server)
    yield r
    r.stop()


def data(repo: Repo, name: str) -> Any:
    live = repo.live(ref("ConfigMap", name))
    return None if live is None else live.get("data")


def test_a_hand_edit_is_re_applied_with_one_write(repair: Repair, server: FakeApiServer,
                                                  repo: Repo) -> None:
    server.edit("v1", "ConfigMap", NS, "a-one", {"data": {"colour": "red"}})
    repair.settle(lambda: data(repo, "a-one") == {"colour": "blue"}, "the edit repaired")
    assert repair.writes() == [("apply", f"/api/v1/namespaces/{NS}/configmaps/a-one")]


def test_a_hand_delete_is_re_created(repair: Repair, server: FakeApiServer, repo: Repo) -> None:
    repo.kube.delete(repo.kube.resource("v1", "ConfigMap"), NS, "a-two")
    server.clear_log()
    repair.settle(lambda: data(repo, "a-two") == {"size": "large"}, "the delete repaired")
    assert repair.writes() == [("apply", f"/api/v1/namespaces/{NS}/configmaps/a-two")]


def test_a_deleted_create_if_absent_object_is_created_again_but_an_edit_is_left(
        repair: Repair, server: FakeApiServer, repo: Repo) -> None:
    server.edit("v1", "ConfigMap", NS, "a-once", {"data": {"kept": "edited"}})
    # the edit is left alone; a later edit of another key shows the queue has passed it
    server.edit("v1", "ConfigMap", NS, "b-one", {"data": {"colour": "red"}})
    repair.settle(lambda: data(repo, "b-one") == {"colour": "blue"}, "b-one repaired")
    assert data(repo, "a-once") == {"kept": "edited"}
    assert repair.writes() == [("apply", f"/api/v1/namespaces/{NS}/configmaps/b-one")]
    server.clear_log()
    repo.kube.delete(repo.kube.resource("v1", "ConfigMap"), NS, "a-once")
    server.clear_log()
    repair.settle(lambda: data(repo, "a-once") == {"kept": "yes"}, "a-once created again")
    assert repair.writes() == [("create", f"/api/v1/namespaces/{NS}/configmaps")]


def test_the_repairs_own_writes_and_fields_orksync_does_not_set_trigger_nothing(
        repair: Repair, server: FakeApiServer, repo: Repo) -> None:
    server.edit("v1", "ConfigMap", NS, "a-one", {"data": {"colour": "red"}})
    repair.settle(lambda: data(repo, "a-one") == {"colour": "blue"}, "the edit repaired")
    # another manager's field and a label orksync does not set: not drift
    server.edit("v1", "ConfigMap", NS, "a-two", {"metadata": {"labels": {"team": "x"}},
                                                "data": {"extra": "1"}})
    server.edit("v1", "ConfigMap", NS, "b-one", {"data": {"colour": "red"}})
    repair.settle(lambda: data(repo, "b-one") == {"colour": "blue"}, "b-one repaired")
    assert repair.writes() == [("apply", f"/api/v1/namespaces/{NS}/configmaps/a-one"),
                               ("apply", f"/api/v1/namespaces/{NS}/configmaps/b-one")]
    assert data(repo, "a-two") == {"size": "large", "extra": "1"}


def test_a_standby_writes_nothing(repo: Repo, server: FakeApiServer) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD, "a.yaml": widget("a", NS)})
    standby = Repair(repo, server, leading=False)
    try:
        server.edit("v1", "ConfigMap", NS, "a-one", {"data": {"colour": "red"}})
        wait_for("the informer saw the edit", lambda: (standby.drift.informers.get(
            ref("ConfigMap", "a-one")) or {}).get("data") == {"colour": "red"}, timeout=20)
        assert len(standby.drift.queue) == 0 and standby.writes() == []
    finally:
        standby.stop()


def test_informers_list_again_after_410_gone_and_still_repair(
        repair: Repair, server: FakeApiServer, repo: Repo) -> None:
    registry = repair.drift.metrics.registry
    server.edit("v1", "ConfigMap", NS, "a-one", {"data": {"colour": "red"}})
    server.compact()  # the edit's event is forgotten, and every watch's resourceVersion
    server.end_watches()  # reconnects: 410 Gone, a LIST shows the edit
    repair.settle(lambda: data(repo, "a-one") == {"colour": "blue"}, "the edit repaired")
    assert repair.writes() == [("apply", f"/api/v1/namespaces/{NS}/configmaps/a-one")]
    assert (registry.get_sample_value("orksync_watch_restarts_total",
                                      {"reason": "gone"}) or 0) >= 1

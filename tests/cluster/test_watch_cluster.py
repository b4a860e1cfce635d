"""Informers (orksync.cluster.watch) against the real control plane: list then watch,
events for what others write, a connection cut by the fault proxy resumed without a
missed event, and a resourceVersion the server no longer has listed again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.cluster.watch import Informer
from testbed.controlplane import ControlPlane
from testbed.faultproxy import HttpFaultProxy, TcpFaultProxy
from tests.helpers import wait_for

pytestmark = pytest.mark.cluster



class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []  # (type, name, data.v)
        self.lock = threading.Lock()

    def __call__(self, kind: str, obj: dict[str, Any], _: dict[str, Any] | None) -> None:
        with self.lock:
            self.events.append((kind, obj["metadata"]["name"],
                                str((obj.get("data") or {}).get("v"))))

    def has(self, event: tuple[str, str, str]) -> bool:
        with self.lock:
            return event in self.events


def configmap(ns: str, name: str, label: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"watch-test": label}},
            "data": {"v": value}}


def test_an_informer_lists_then_reports_what_others_write(setup: Any) -> None:
    kube, ns, label = setup
    maps = kube.resource("v1", "ConfigMap")
    kube.create(maps, configmap(ns, "a", label, "1"), field_manager="test")
    kube.create(maps, configmap(ns, "unlabelled", "other", "1"), field_manager="test")
    seen = Seen()
    informer = Informer(kube, ("v1", "ConfigMap"), label_selector=f"watch-test={label}",
                        on_event=seen).start()
    try:
        assert informer.synced.wait(30)
        assert [o["metadata"]["name"] for o in informer.items()] == ["a"]
        assert seen.has(("ADDED", "a", "1"))
        kube.create(maps, configmap(ns, "b", label, "1"), field_manager="test")
        kube.apply(maps, configmap(ns, "a", label, "2"), field_manager="test", force=True)
        kube.delete(maps, ns, "b")
        wait_for("the three events", lambda: seen.has(("DELETED", "b", "1")))
        assert seen.has(("ADDED", "b", "1")) and seen.has(("MODIFIED", "a", "2"))
        assert [o["metadata"]["name"] for o in informer.items()] == ["a"]
        assert informer.restarts == 0
    finally:
        informer.stop()


def test_an_informer_keeps_no_managed_fields_but_a_secret_s(setup: Any) -> None:
    """A stored object without metadata.managedFields, listed or watched; a Secret's
    keep them (which data keys orksync applied)."""
    kube, ns, label = setup
    maps, secrets = kube.resource("v1", "ConfigMap"), kube.resource("v1", "Secret")
    kube.create(maps, configmap(ns, "listed", label, "1"), field_manager="test")
    kube.create(secrets, {**configmap(ns, "listed", label, "1"), "kind": "Secret",
                          "data": {"v": "MQ=="}}, field_manager="test")
    informers = [Informer(kube, kind, label_selector=f"watch-test={label}").start()
                 for kind in (("v1", "ConfigMap"), ("v1", "Secret"))]
    try:
        assert all(i.synced.wait(30) for i in informers)
        kube.create(maps, configmap(ns, "watched", label, "1"), field_manager="test")
        kube.create(secrets, {**configmap(ns, "watched", label, "1"), "kind": "Secret",
                              "data": {"v": "MQ=="}}, field_manager="test")
        wait_for("both watched", lambda: all(len(i.items()) == 2 for i in informers))
        configmaps, secret_items = (i.items() for i in informers)
        assert all("managedFields" not in o["metadata"] for o in configmaps)
        assert all(o["metadata"]["managedFields"][0]["manager"] == "test"
                   for o in secret_items)
        assert {o["metadata"]["name"] for o in configmaps} == {"listed", "watched"}
    finally:
        for informer in informers:
            informer.stop()


def test_a_cut_watch_resumes_and_misses_nothing_written_while_it_was_down(
        setup: Any, control_plane: ControlPlane, tmp_path: Path) -> None:
    kube, ns, label = setup
    maps = kube.resource("v1", "ConfigMap")
    for name in ("a", "b"):
        kube.create(maps, configmap(ns, name, label, "1"), field_manager="test")
    with TcpFaultProxy.for_control_plane(control_plane) as relay:
        through = Kube.from_kubeconfig(relay.kubeconfig(tmp_path / "kubeconfig"))
        seen = Seen()
        informer = Informer(through, ("v1", "ConfigMap"), label_selector=f"watch-test={label}",
                            on_event=seen).start()
        try:
            assert informer.synced.wait(30)
            # the watch is open once an event comes through it (synced means listed only):
            # a cut before it opens would cut nothing
            kube.create(maps, configmap(ns, "w", label, "1"), field_manager="test")
            wait_for("the watch to stream", lambda: seen.has(("ADDED", "w", "1")))
            kube.delete(maps, ns, "w")
            wait_for("the watch to stream the delete", lambda: seen.has(("DELETED", "w", "1")))
            relay.refuse()
            relay.cut_all()  # the open watch is cut; new connections are refused
            wait_for("the watch to fail", lambda: informer.restarts >= 1)
            kube.apply(maps, configmap(ns, "a", label, "2"), field_manager="test", force=True)
            kube.delete(maps, ns, "b")
            kube.create(maps, configmap(ns, "c", label, "1"), field_manager="test")
            assert not seen.has(("MODIFIED", "a", "2"))
            relay.resume()
            wait_for("the writes made while it was cut", lambda: seen.has(
                ("MODIFIED", "a", "2")) and seen.has(("DELETED", "b", "1")) and seen.has(
                ("ADDED", "c", "1")))
            assert sorted(o["metadata"]["name"] for o in informer.items()) == ["a", "c"]
        finally:
            informer.stop()
            through.close()


def test_a_watch_answered_410_gone_lists_again(setup: Any, control_plane: ControlPlane,
                                              tmp_path: Path) -> None:
    kube, ns, label = setup
    maps = kube.resource("v1", "ConfigMap")
    kube.create(maps, configmap(ns, "a", label, "1"), field_manager="test")
    with HttpFaultProxy.for_control_plane(control_plane) as proxy:
        # the proxy reads an answer whole: short watches (2 s) pass through it
        through = Kube.from_kubeconfig(proxy.kubeconfig(tmp_path / "kubeconfig"))
        path = "^/api/v1/configmaps$"
        proxy.inject(410, method="GET", path=path, skip=1)  # the first WATCH: Gone
        seen = Seen()
        informer = Informer(through, ("v1", "ConfigMap"), label_selector=f"watch-test={label}",
                            on_event=seen, watch_timeout=2).start()
        try:
            wait_for("a LIST after the 410", lambda: [
                ("watch=1" in s.query, s.status) for s in proxy.seen(method="GET", path=path)
            ][:3] == [(False, 200), (True, 410), (False, 200)])
            assert informer.restarts == 1
            kube.apply(maps, configmap(ns, "a", label, "2"), field_manager="test", force=True)
            wait_for("the edit after the relist", lambda: seen.has(("MODIFIED", "a", "2")))
        finally:
            informer.stop()
            through.close()


# an exception that ends the informer's thread fails the test
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_informer_stopped_while_its_watch_waits_ends_its_thread_cleanly(setup: Any
                                                                          ) -> None:
    """`stop` wakes the read waiting on an open watch (no event is coming) and the
    informer's thread ends without an exception."""
    kube, ns, label = setup
    maps = kube.resource("v1", "ConfigMap")
    seen = Seen()
    informer = Informer(kube, ("v1", "ConfigMap"),
                        label_selector=f"watch-test={label}", on_event=seen).start()
    try:
        assert informer.synced.wait(30)
        kube.create(maps, configmap(ns, "a", label, "1"), field_manager="test")
        kube.apply(maps, configmap(ns, "a", label, "2"), field_manager="test", force=True)
        wait_for("the events", lambda: seen.has(("MODIFIED", "a", "2")))
        assert seen.has(("ADDED", "a", "1")) and informer.restarts == 0
    finally:
        informer.stop()
    # `stop` woke the read waiting on the open watch: the thread has ended
    assert informer._thread is not None and not informer._thread.is_alive()

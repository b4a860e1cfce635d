"""Shared informers (orksync.cluster.shared_watch) against the real control plane: one
watch per kind, each view holding the objects of its label value only, an object moving
between two values, and a value subscribed to after the watch began."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.cluster.shared_watch import SharedInformers
from tests.helpers import wait_for

pytestmark = pytest.mark.cluster

MAPS = ("v1", "ConfigMap")


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []  # (type, name)
        self.lock = threading.Lock()

    def __call__(self, kind: str, obj: dict[str, Any], _: dict[str, Any] | None) -> None:
        with self.lock:
            self.events.append((kind, obj["metadata"]["name"]))

    def has(self, event: tuple[str, str]) -> bool:
        with self.lock:
            return event in self.events


def put(kube: Kube, ns: str, name: str, key: str, value: str, data: str = "1") -> None:
    kube.apply(kube.resource(*MAPS), {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {key: value}},
        "data": {"v": data}}, field_manager="test", force=True)


def names(view: Any) -> set[str]:
    return {o["metadata"]["name"] for o in view.items(MAPS) or []}


def test_views_of_one_watch_hold_their_own_value_and_follow_a_move(setup: Any) -> None:
    kube, ns, label = setup
    key = f"shared-{label}"
    for name, value in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c")):
        put(kube, ns, name, key, value)
    shared = SharedInformers(kube, key)
    try:
        seen_a, seen_b = Seen(), Seen()
        a, b = shared.view("a", seen_a), shared.view("b", seen_b)
        a.watch({MAPS})
        wait_for("a synced", a.synced)
        assert names(a) == {"a1", "a2"}
        put(kube, ns, "a3", key, "a")  # written after a's catch-up: through the watch
        wait_for("a3 seen", lambda: seen_a.has(("ADDED", "a3")))
        b.watch({MAPS})  # subscribed after the watch began: its own catch-up
        wait_for("b synced", b.synced)
        assert names(b) == {"b1"}
        assert len(shared._kinds) == 1  # one watch of ConfigMaps for both
        put(kube, ns, "a1", key, "b")  # a1 moves from a to b
        wait_for("a1 moved", lambda: seen_a.has(("DELETED", "a1")) and
                 seen_b.has(("ADDED", "a1")))
        assert names(a) == {"a2", "a3"} and names(b) == {"b1", "a1"}
        kube.delete(kube.resource(*MAPS), ns, "a2")
        wait_for("a2 deleted", lambda: seen_a.has(("DELETED", "a2")))
        assert names(a) == {"a3"}
        assert not any(name == "c1" for _, name in seen_a.events + seen_b.events)
        a.stop()
        assert a.items(MAPS) is None and len(shared._kinds) == 1
        b.stop()
        assert not shared._kinds  # nobody watches ConfigMaps: the watch stopped
    finally:
        shared.stop()


def test_a_view_keeps_no_managed_fields_caught_up_or_watched(setup: Any) -> None:
    kube, ns, label = setup
    key = f"slim-{label}"
    put(kube, ns, "listed", key, "a")
    shared = SharedInformers(kube, key)
    try:
        view = shared.view("a", Seen())
        view.watch({MAPS})
        wait_for("synced", view.synced)
        put(kube, ns, "watched", key, "a")
        wait_for("watched", lambda: names(view) == {"listed", "watched"})
        assert all("managedFields" not in o["metadata"] for o in view.items(MAPS) or [])
    finally:
        shared.stop()


def test_expected_values_are_listed_together_and_their_views_take_them_over(
        setup: Any) -> None:
    """A replica taking many Syncs says so first: the values expected get one catch-up
    LIST (`key in (...)`) when their kind is first watched, and the views subscribing
    later find their objects listed, without a LIST of their own; a value forgotten
    before its view came is dropped."""
    kube, ns, label = setup
    key = f"early-{label}"
    for name, value in (("a1", "a"), ("b1", "b"), ("b2", "b"), ("c1", "c"), ("z1", "z")):
        put(kube, ns, name, key, value)
    selectors: list[str] = []
    listing = kube.list

    def counted(res: Any, **kwargs: Any) -> Any:
        selectors.append(str(kwargs.get("label_selector")))
        return listing(res, **kwargs)

    kube.list = counted  # type: ignore[method-assign]
    shared = SharedInformers(kube, key)
    try:
        shared.expect(["a", "b", "c"])
        a, b = shared.view("a", Seen()), shared.view("b", Seen())
        a.watch({MAPS})  # the kind's first watch: a's, b's and c's parts caught up at once
        wait_for("a synced", a.synced)
        b.watch({MAPS})
        wait_for("b synced", b.synced)
        assert names(a) == {"a1"} and names(b) == {"b1", "b2"}
        assert selectors == [f"{key} in (a,b,c)"], selectors
        shared.forget("c")  # never taken by a view: dropped
        assert set(shared._kinds[MAPS].parts) == {"a", "b"}
        put(kube, ns, "b3", key, "b")  # b's view, taken over, hears its events
        wait_for("b3 in b's view", lambda: "b3" in names(b))
    finally:
        shared.stop()

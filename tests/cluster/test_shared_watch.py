"""The merge decisions of shared informers (orksync.cluster.shared_watch), driven by hand:
watch events and a part's catch-up LIST in the orders a busy API server can produce.
The real watch and LISTs: test_shared_watch_cluster.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from orksync.cluster.kube import Resource
from orksync.cluster.shared_watch import Part, _Routed

KEY = "orksync.io/shard"
MAPS = ("v1", "ConfigMap")
RES = Resource(group="", version="v1", kind="ConfigMap", plural="configmaps", namespaced=True)


class Listed:
    """A Kube whose LIST answers what the test says the server held at some version."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.selectors: list[str] = []

    def resource(self, *_: str) -> Resource:
        return RES

    def list(self, _: Resource, *, label_selector: str = "") -> Iterator[dict[str, Any]]:
        self.selectors.append(label_selector)
        if " in (" in label_selector:  # `key in (a,b)`
            values = set(label_selector.partition(" in (")[2].rstrip(")").split(","))
        else:  # `key=a`
            values = {label_selector.partition("=")[2]}
        return iter([i for i in self.items if i["metadata"]["labels"][KEY] in values])


class Pool:
    def __init__(self) -> None:
        self.submitted: list[Any] = []

    def submit(self, fn: Any, *args: Any) -> None:
        self.submitted.append((fn, args))


def cm(name: str, value: str, version: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "labels": {KEY: value},
                         "resourceVersion": str(version)}}


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def routed() -> tuple[_Routed, Listed, list[tuple[str, str, str]]]:
    kube = Listed()
    informer = _Routed(kube, MAPS, KEY, within="", pool=Pool(),  # type: ignore[arg-type]
                       on_restart=None)
    informer._started = True
    return informer, kube, []


def part(informer: _Routed, value: str, seen: list[tuple[str, str, str]]) -> Part:
    p = Part(value, lambda kind, obj, _: seen.append((value, kind, obj["metadata"]["name"])))
    informer.add(p)
    return p


def catch_up(informer: _Routed, part: Part) -> None:
    """The part's catch-up LIST, run now rather than on the pool."""
    informer._catch_up([(part, 0)])


def names(p: Part) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in p.items()}


def test_a_catch_up_older_than_the_watch_keeps_the_watch_s_state() -> None:
    informer, kube, seen = routed()
    a = part(informer, "sync-a", seen)
    # the LIST's snapshot (version 10) is answered after the watch delivered 11 and 12
    kube.items = [cm("x", "sync-a", 9), cm("y", "sync-a", 10), cm("z", "sync-a", 8)]
    informer._event(event("MODIFIED", cm("y", "sync-a", 11)), RES)
    informer._event(event("DELETED", cm("x", "sync-a", 12)), RES)
    assert not a.synced.is_set()
    catch_up(informer, a)
    assert a.synced.is_set()
    assert names(a) == {"y": "11", "z": "8"}  # x not brought back, y not made older
    assert ("sync-a", "ADDED", "x") not in seen


def test_an_object_moved_to_another_value_during_a_catch_up_stays_moved() -> None:
    informer, kube, seen = routed()
    a = part(informer, "sync-a", seen)
    kube.items = [cm("crd", "sync-a", 5)]
    informer._event(event("MODIFIED", cm("crd", "sync-b", 6)), RES)  # b wrote it since
    catch_up(informer, a)
    assert names(a) == {}


def test_an_object_relabelled_leaves_one_part_and_joins_the_other() -> None:
    informer, kube, seen = routed()
    a, b = part(informer, "sync-a", seen), part(informer, "sync-b", seen)
    kube.items = [cm("crd", "sync-a", 5)]
    catch_up(informer, a)
    catch_up(informer, b)
    informer._event(event("MODIFIED", cm("crd", "sync-b", 6)), RES)
    assert names(a) == {} and names(b) == {"crd": "6"}
    assert seen[-2:] == [("sync-a", "DELETED", "crd"), ("sync-b", "ADDED", "crd")]
    informer._event(event("MODIFIED", cm("crd", "sync-c", 7)), RES)  # to a value not here
    assert names(b) == {} and seen[-1] == ("sync-b", "DELETED", "crd")


def test_a_catch_up_newer_than_another_part_s_copy_takes_the_object_from_it() -> None:
    informer, kube, seen = routed()
    a, b = part(informer, "sync-a", seen), part(informer, "sync-b", seen)
    kube.items = [cm("crd", "sync-a", 5)]
    catch_up(informer, a)
    kube.items = [cm("crd", "sync-b", 9)]  # b's LIST is ahead of the watch
    catch_up(informer, b)
    assert names(a) == {} and names(b) == {"crd": "9"}
    informer._event(event("MODIFIED", cm("crd", "sync-b", 9)), RES)  # the watch catches up
    assert names(a) == {} and names(b) == {"crd": "9"}


def test_objects_of_values_nobody_subscribed_to_are_dropped() -> None:
    informer, _, seen = routed()
    a = part(informer, "sync-a", seen)
    catch_up(informer, a)
    informer._event(event("ADDED", cm("other", "sync-z", 3)), RES)
    assert names(a) == {} and not seen
    assert not informer._where


def test_values_waiting_for_their_catch_up_share_one_list() -> None:
    informer, kube, seen = routed()
    kube.items = [cm("x", "sync-a", 5), cm("y", "sync-b", 6), cm("z", "sync-c", 7)]
    a, b = part(informer, "sync-a", seen), part(informer, "sync-b", seen)
    pool = informer.pool
    assert isinstance(pool, Pool) and len(pool.submitted) == 2  # a run for each
    for fn, args in pool.submitted:  # the first takes both; the second finds none waiting
        fn(*args)
    assert kube.selectors == [f"{KEY} in (sync-a,sync-b)"]
    assert a.synced.is_set() and b.synced.is_set()
    assert names(a) == {"x": "5"} and names(b) == {"y": "6"}  # not sync-c's object

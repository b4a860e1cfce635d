"""The replicas' share of the Syncs (orksync.agent.membership) on a simulated clock and an
in-memory store of Leases with the API server's optimistic concurrency: who may take a
claim and when, what a lapse of the member Lease costs, and how little rendezvous moves.
The real processes are in tests/agent/test_scaleout_cluster.py."""

from __future__ import annotations

import copy
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orksync.agent.lease import LeaderElector
from orksync.agent.membership import Membership, rendezvous
from orksync.errors import ClusterError, LeadershipLost
from tests.agent.test_lease import Clock


class Leases:
    """Leases by name, resourceVersion-checked; `down` holds the identities whose requests
    fail (a replica cut off)."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.down: set[str] = set()

    def _store(self, body: dict[str, Any]) -> Any:
        self.version += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.version)
        stored["metadata"].setdefault("uid", f"uid-{self.version}")
        self.items[stored["metadata"]["name"]] = stored
        return copy.deepcopy(stored)


class View:
    """The store as one replica sees it."""

    def __init__(self, leases: Leases, identity: str) -> None:
        self.leases, self.identity = leases, identity

    def _check(self) -> None:
        if self.identity in self.leases.down:
            raise ClusterError("connection refused")

    def get_or_none(self, res: Any, namespace: str, name: str) -> Any:
        self._check()
        return copy.deepcopy(self.leases.items.get(name))

    def list(self, res: Any, *, namespace: str = "", label_selector: str = "") -> Any:
        self._check()
        wanted = dict(term.split("=") for term in label_selector.split(","))
        return [copy.deepcopy(i) for i in self.leases.items.values()
                if all((i["metadata"].get("labels") or {}).get(k) == v
                       for k, v in wanted.items())]

    def create(self, res: Any, body: dict[str, Any], **_: Any) -> Any:
        self._check()
        if body["metadata"]["name"] in self.leases.items:
            raise ClusterError("exists", status=409)
        return self.leases._store(body)

    def request(self, method: str, path: str, *, body: dict[str, Any], **_: Any) -> Any:
        self._check()
        name = path.rsplit("/", 1)[1]
        current = self.leases.items.get(name)
        if current is None:
            raise ClusterError("not found", status=404)
        if body["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise ClusterError("conflict", status=409)
        return self.leases._store(body)

    def delete(self, res: Any, namespace: str, name: str, **_: Any) -> Any:
        self._check()
        self.leases.items.pop(name, None)


def member(leases: Leases, clock: Clock, identity: str, generation: str = "") -> Membership:
    wall = datetime(2026, 1, 1, tzinfo=UTC)
    return Membership(View(leases, identity), group="orksync-syncs-default",  # type: ignore[arg-type]
                      namespace="orksync-system", identity=identity, lease_duration=15.0,
                      renew_deadline=10.0, retry_period=2.0, generation=generation,
                      monotonic=clock, wallclock=lambda: wall + timedelta(seconds=clock.now))


def round_of(*members: Membership) -> None:
    """One retry period of every replica: renew its member Lease, then look."""
    for m in members:
        m.member.try_acquire_or_renew()
        if m.member._was_leading and not m.member.leading:
            m.member._lost()
    for m in members:
        m.refresh()


def test_a_claim_moves_only_after_its_holder_stopped_writing() -> None:
    """b should serve the Sync (rendezvous) but a holds its claim: b waits while a renews;
    once a is cut off, b takes the claim only after a's gate closed."""
    clock, leases = Clock(), Leases()
    key = next(k for k in (f"ns/s{i}" for i in range(100)) if rendezvous(k, ["a", "b"]) == "b")
    a, b = member(leases, clock, "a"), member(leases, clock, "b")
    a.member.on_stopped_leading = a._lapse
    round_of(a)
    assert a.acquire(key) is not None and a.check(key) > 0
    for _ in range(20):  # a renews: its claim is never taken
        clock.now += 2
        round_of(a, b)
        assert b.owner(key) == "b" and b.acquire(key) is None
    leases.down.add("a")
    while True:
        clock.now += 2
        round_of(a, b)
        taken = b.acquire(key)
        if taken is not None:
            break
    assert taken.how == "expired" and taken.previous == "a"
    with pytest.raises(LeadershipLost):
        a.check(key)
    assert b.check(key) > 0


def test_a_released_claim_is_taken_at_the_next_round() -> None:
    clock, leases = Clock(), Leases()
    a, b = member(leases, clock, "a"), member(leases, clock, "b")
    round_of(a, b)
    assert a.acquire("ns/s") is not None
    round_of(a, b)
    assert b.acquire("ns/s") is None
    a.release("ns/s")
    with pytest.raises(LeadershipLost):
        a.check("ns/s")
    round_of(a, b)
    taken = b.acquire("ns/s")
    assert taken is not None and taken.how == "released"


def test_a_lapse_of_the_member_lease_drops_every_claim_even_when_renewals_resume() -> None:
    clock, leases = Clock(), Leases()
    a = member(leases, clock, "a")
    a.member.on_stopped_leading = a._lapse
    round_of(a)
    assert a.acquire("ns/s") is not None
    leases.down.add("a")
    for _ in range(6):  # past the renew deadline
        clock.now += 2
        round_of(a)
    leases.down.clear()
    clock.now += 2
    round_of(a)
    assert a.member.leading
    with pytest.raises(LeadershipLost):
        a.check("ns/s")  # the claim is taken again explicitly, never kept across a lapse
    assert a.acquire("ns/s") is not None and a.check("ns/s") > 0


def test_a_leader_stalled_past_its_renew_deadline_reports_the_lapse_before_renewing() -> None:
    """The election thread waits a retry period between tries; when that wait overran the
    renew deadline (a stalled process) and the next renewal succeeds, the gate was closed
    meanwhile: the holder is told it stopped leading, so that it drops what it held."""
    from tests.agent.test_lease import Kube, Store

    clock, store = Clock(), Store()
    elector = LeaderElector(Kube(store), name="x", namespace="orksync-system", identity="a",
                            monotonic=clock)
    stopped: list[bool] = []
    elector.on_stopped_leading = lambda: stopped.append(True)

    class Stop(threading.Event):
        rounds = 0

        def wait(self, timeout: float | None = None) -> bool:
            self.rounds += 1
            clock.now += 12 if self.rounds == 1 else 2  # the first wait overruns
            if self.rounds == 2:
                self.set()
            return self.is_set()

    elector.run(Stop())
    assert stopped == [True]
    assert elector.leading  # and it leads again after


def test_a_new_replica_takes_about_its_share_and_nothing_else() -> None:
    keys = [f"ns-{i % 7}/sync-{i}" for i in range(3000)]
    before = {k: rendezvous(k, ["a", "b", "c"]) for k in keys}
    after = {k: rendezvous(k, ["a", "b", "c", "d"]) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(after[k] == "d" for k in moved)  # only to the new replica
    assert 600 < len(moved) < 900  # about 1/4 of 3000
    back = {k: rendezvous(k, ["a", "b", "c"]) for k in keys}
    assert back == before  # scaling back restores the same assignment


def test_a_rolling_update_moves_each_sync_once_to_the_replica_taking_the_slot() -> None:
    """Replicas of generation 1 serve; one of generation 2 starts and waits (ready) while
    they run, then takes the slot the first to leave releases: it serves exactly that
    replica's Syncs, and a second new one then exactly the other's."""
    leases, clock = Leases(), Clock()
    keys = [f"ns/sync-{i}" for i in range(300)]
    old = [member(leases, clock, name, "1") for name in ("a", "b")]
    for m in old:
        assert m.take_slot()
    round_of(*old)
    before = {k: old[0].owner(k) for k in keys}
    assert set(before.values()) == {"a", "b"}
    served: list[Membership] = list(old)
    for new_name, leaving in (("c", old[0]), ("d", old[1])):
        new = member(leases, clock, new_name, "2")
        for _ in range(3):  # the old generation still runs: it waits, however long
            new.refresh()
            assert not new.take_slot() and "generation 1" in new.waiting
            clock.now += 2
            round_of(*served)
        leaving.member.release()
        served.remove(leaving)
        round_of(*served)  # kept vacant for the waiting replica, not taken by the others
        assert {k: served[0].owner(k) for k in keys} == {
            k: "" if o == leaving.identity else o for k, o in before.items()}
        assert new.take_slot() and not new.waiting
        served.append(new)
        round_of(*served)
        for m in served:
            owners = {k: m.owner(k) for k in keys}
            assert owners == {k: new_name if o == leaving.identity else o
                              for k, o in before.items()}
        before = owners


def test_a_replica_of_the_same_generation_or_none_takes_a_slot_of_its_own() -> None:
    """Scaling up (no other generation live): the new replica does not wait, and takes
    about its share; a released slot is taken first when there is one."""
    leases, clock = Leases(), Clock()
    first = [member(leases, clock, name, "1") for name in ("a", "b", "c")]
    for m in first:
        assert m.take_slot()
    round_of(*first)
    d = member(leases, clock, "d", "1")
    assert d.take_slot() and d.member.annotations["orksync.io/slot"] == "d"
    round_of(*first, d)
    keys = [f"ns/sync-{i}" for i in range(3000)]
    assert 600 < sum(d.owner(k) == "d" for k in keys) < 900
    first[0].member.release()
    round_of(*first[1:], d)  # nobody waits: the others take the released slot's Syncs
    assert {first[1].owner(k) for k in keys} == {"b", "c", "d"}
    e = member(leases, clock, "e")
    assert e.take_slot() and e.member.annotations["orksync.io/slot"] == "a"
    round_of(*first[1:], d)
    clock.now += 16  # a released slot nobody took within the lease duration goes
    first[2].member.release()
    round_of(*first[1:2], d)
    clock.now += 16
    round_of(*first[1:2], d)
    assert not any(name.startswith("orksync-member-") and not item["spec"]["holderIdentity"]
                   for name, item in leases.items.items())


def test_the_member_lease_of_a_killed_replica_is_deleted_after_four_lease_durations() -> None:
    clock, leases = Clock(), Leases()
    a, b = member(leases, clock, "a"), member(leases, clock, "b")
    round_of(a, b)
    slot = a.member.name
    leases.down.add("a")  # killed: it never renews nor releases
    killed = clock.now
    while clock.now < killed + 4 * 15.0 - 4:
        clock.now += 2
        round_of(b)
        assert slot in leases.items  # expired, but kept a while (harmless)
    for _ in range(3):
        clock.now += 2
        round_of(b)
    assert slot not in leases.items
    assert b.member.name in leases.items  # its own, never

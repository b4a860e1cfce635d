"""Leader election's rules (orksync.agent.lease) on a simulated clock and an in-memory Lease
store with the API server's optimistic concurrency. The real two-process proof is in
tests/agent/test_agent_cluster.py; these check the arithmetic of the rules, step by step."""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orksync.agent.lease import LeaderElector
from orksync.errors import ClusterError, LeadershipLost, UsageError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Store:
    """One Lease, resourceVersion-checked like the API server; `down` fails every request."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.down = False
        self.writes: list[str] = []  # holder identity of every accepted write

    def check(self) -> None:
        if self.down:
            raise ClusterError("GET failed: 503", status=503)

    def get_or_none(self, res: Any, namespace: str, name: str) -> Any:
        self.check()
        return copy.deepcopy(self.lease)

    def create(self, res: Any, body: dict[str, Any], **_: Any) -> Any:
        self.check()
        if self.lease is not None:
            raise ClusterError("exists", status=409)
        return self._store(body)

    def request(self, method: str, path: str, *, body: dict[str, Any], **_: Any) -> Any:
        self.check()
        assert method == "PUT" and self.lease is not None
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise ClusterError("conflict", status=409)
        return self._store(body)

    def _store(self, body: dict[str, Any]) -> Any:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        self.writes.append(body["spec"]["holderIdentity"])
        return self.lease


class Kube:
    """The store as one replica sees it: its own failures on top of the store's."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.down = False

    def __getattr__(self, name: str) -> Any:
        if self.down:
            def fail(*_: Any, **__: Any) -> Any:
                raise ClusterError("connection refused")
            return fail
        return getattr(self.store, name)


def elector(kube: Any, clock: Clock, identity: str, *,
            wallclock: datetime | None = None) -> LeaderElector:
    wall = wallclock or datetime(2026, 1, 1, tzinfo=UTC)
    return LeaderElector(kube, name="orksync-default", namespace="orksync-system",
                         identity=identity, monotonic=clock,
                         wallclock=lambda: wall + timedelta(seconds=clock.now))


def test_the_first_candidate_creates_the_lease_and_leads() -> None:
    clock, store = Clock(), Store()
    a = elector(Kube(store), clock, "a")
    assert a.try_acquire_or_renew() and a.leading
    a.check()
    assert store.lease is not None and store.lease["spec"]["holderIdentity"] == "a"


def test_a_standby_never_takes_over_while_the_holder_renews_whatever_the_clocks_say() -> None:
    """The holder's renewTime is written by a clock a day behind ours: only the changes of
    the record count, never its times compared with ours."""
    clock, store = Clock(), Store()
    a = elector(Kube(store), clock, "a", wallclock=datetime(2025, 12, 31, tzinfo=UTC))
    b = elector(Kube(store), clock, "b")
    a.try_acquire_or_renew()
    for _ in range(100):
        clock.now += 2
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew() and not b.leading
    assert set(store.writes) == {"a"}


def test_a_standby_takes_over_within_lease_duration_plus_retry_period_of_the_last_renewal(
        ) -> None:
    for offset in (0.0, 0.5, 1.0, 1.9):  # where the standby's tries fall between renewals
        clock, store = Clock(), Store()
        a, b = elector(Kube(store), clock, "a"), elector(Kube(store), clock, "b")
        a.try_acquire_or_renew()
        clock.now += offset
        b.try_acquire_or_renew()
        clock.now += 2 - offset
        a.try_acquire_or_renew()
        last_renewal = clock.now
        while not b.try_acquire_or_renew():
            clock.now += b.retry_period
            assert clock.now - last_renewal <= b.lease_duration + b.retry_period
        assert b.leading and store.writes[-1] == "b"
        # the margin: the old leader's gate closed before the standby took over
        assert clock.now - last_renewal > a.renew_deadline and not a.leading


def test_a_leader_that_cannot_renew_stops_writing_at_the_renew_deadline() -> None:
    clock, store = Clock(), Store()
    kube = Kube(store)
    a = elector(kube, clock, "a")
    a.try_acquire_or_renew()
    kube.down = True
    while clock.now < 1000 + a.renew_deadline - 0.01:
        clock.now += 0.5
        a.try_acquire_or_renew()
        if clock.now - 1000 < a.renew_deadline:
            assert a.leading  # within the deadline a failed renewal changes nothing
    clock.now = 1000 + a.renew_deadline
    assert not a.leading
    with pytest.raises(LeadershipLost, match="does not hold the lease"):
        a.check()


def test_a_released_lease_is_taken_at_the_next_try() -> None:
    clock, store = Clock(), Store()
    a, b = elector(Kube(store), clock, "a"), elector(Kube(store), clock, "b")
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert not a.leading
    assert b.try_acquire_or_renew() and b.leading
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1


@pytest.mark.parametrize("seed", range(20))
def test_never_two_leaders_under_random_delays_partitions_and_deaths(seed: int) -> None:
    """Three replicas whose tries run late by random amounts, lose the API server for a
    while, or die and come back: at no step of 0.1 s do two of them hold the write gate."""
    rng = random.Random(seed)
    clock, store = Clock(), Store()
    kubes = [Kube(store) for _ in range(3)]
    electors = [elector(k, clock, f"r{i}") for i, k in enumerate(kubes)]
    next_try = [clock.now + rng.uniform(0, 2) for _ in electors]
    dead_until = [0.0] * 3
    leaders_seen = set()
    for _ in range(6000):
        clock.now = round(clock.now + 0.1, 6)
        for i, e in enumerate(electors):
            if clock.now < dead_until[i]:
                continue
            if rng.random() < 0.0005:  # dies (a SIGKILL: nothing released) for a while
                dead_until[i] = clock.now + rng.uniform(1, 40)
                e._renewed_at = None  # a new process remembers nothing
                e._was_leading = False
                e._observed = None
                continue
            if rng.random() < 0.002:
                kubes[i].down = not kubes[i].down  # cut off from the API server, or back
            if clock.now >= next_try[i]:
                e.try_acquire_or_renew()
                # late tries: up to 6 s of delay now and then (a busy machine)
                late = rng.uniform(0, 6) if rng.random() < 0.05 else 0.0
                next_try[i] = clock.now + e.retry_period * (1 - 0.2 * rng.random()) + late
        leading = [e.identity for i, e in enumerate(electors)
                   if clock.now >= dead_until[i] and e.leading]
        assert len(leading) <= 1, (clock.now, leading)
        leaders_seen.update(leading)
    assert leaders_seen  # the simulation did elect someone


def test_settings_that_leave_no_margin_are_refused() -> None:
    with pytest.raises(UsageError, match="renew deadline"):
        LeaderElector(Kube(Store()), name="x", namespace="y", identity="z",
                      lease_duration=10, renew_deadline=9, retry_period=2)


def test_the_agent_flags_reach_its_settings() -> None:
    from orksync.agent.command import agent_config
    from orksync.cli import build_parser

    args = build_parser().parse_args([
        "agent", "--repo-url", "git://example.invalid/r", "--allow-empty", "--prune-crds",
        "--lease-duration", "20s", "--renew-deadline", "12s", "--retry-period", "3s",
        "--webhook-secret-file", "/run/hook/secret"])
    config = agent_config(args)
    assert (config.allow_empty, config.prune_crds) == (True, True)
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (20, 12, 3)
    assert str(config.webhook_secret_file) == "/run/hook/secret"


def test_a_leaders_write_deadline_ends_before_its_renew_deadline() -> None:
    """`check` (the gate of every request) returns the time left to write: each attempt's
    deadline is cut to it (orksync.cluster.kube), so a write that a slow network delays
    is given up before a standby may take the lease over, not 30 s later."""
    clock, store = Clock(), Store()
    a = elector(Kube(store), clock, "a")
    a.try_acquire_or_renew()
    assert a.check() == pytest.approx(a.renew_deadline)
    clock.now += 7.5
    assert a.check() == pytest.approx(a.renew_deadline - 7.5)
    assert a.check() < a.lease_duration - a.retry_period  # before any standby's takeover


def test_each_attempts_deadline_is_bounded_by_the_gates_time_left() -> None:
    import ssl

    from orksync.cluster import kubeconfig
    from orksync.cluster.kube import Kube as RealKube
    from orksync.cluster.retry import RetryPolicy
    from orksync.cluster.transport import ConnectFailed

    kube = RealKube(connection=kubeconfig.Connection(
        server="https://127.0.0.1:1", tls=ssl.create_default_context()), timeout=30.0,
        retry=RetryPolicy(attempts=1))
    seen: list[float] = []

    def request(method: str, url: str, payload: Any, headers: Any, timeout: float) -> Any:
        seen.append(timeout)
        raise ConnectFailed("refused")

    kube._pool.request = request  # type: ignore[method-assign]
    for left in (None, 2.5, 45.0):
        kube.gate = lambda left=left: left  # type: ignore[misc]
        with pytest.raises(ClusterError):
            kube.request("GET", "/api/v1")
    assert seen == [30.0, 2.5, 30.0]

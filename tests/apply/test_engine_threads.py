"""orksync.apply.engine._in_threads, the stage's writer threads (ThreadPoolExecutor.map),
without a cluster (pure logic: the function it runs is a fake). The writes themselves are
tested against the control plane (tests/sync/test_sync_cluster.py,
tests/apply/test_prefetch_cluster.py)."""

from __future__ import annotations

import threading
import time

import pytest

from orksync.apply.engine import _in_threads


def test_every_item_once_results_in_order_at_most_workers_at_a_time() -> None:
    lock = threading.Lock()
    running, most, seen = [0], [0], []

    def fn(i: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            seen.append(i)
        time.sleep(0.002 * (i % 3))  # finish out of order
        with lock:
            running[0] -= 1
        return i * i

    assert _in_threads(fn, list(range(200)), 8) == [i * i for i in range(200)]
    assert sorted(seen) == list(range(200))
    assert 1 < most[0] <= 8
    assert _in_threads(fn, [3], 8) == [9]  # one thread for one item
    assert _in_threads(fn, [], 8) == []


def test_an_exception_is_raised_here_and_stops_handing_out_items() -> None:
    started = []

    def fn(i: int) -> int:
        started.append(i)
        if i == 5:
            raise ValueError("item 5")
        time.sleep(0.005)
        return i

    with pytest.raises(ValueError, match="item 5"):
        _in_threads(fn, list(range(1000)), 4)
    # the threads finish what they hold, take nothing more: the items not started were
    # cancelled (how many start before the waiting thread runs again is the scheduler's
    # business; without the cancel every one of the 1,000 would)
    ran = len(started)
    time.sleep(0.05)
    assert 5 in started and len(started) == ran < 1000
    assert not [t for t in threading.enumerate() if t.name.startswith("orksync-apply")]

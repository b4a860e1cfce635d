"""The agent's work queue (orksync.agent.queue) on a simulated clock: dedupe, one worker
per key, backoff and rate limit of retries; and its workers: a slow key holds no other."""

from __future__ import annotations

import threading
from collections.abc import Callable

from orksync.agent.queue import Workers, WorkQueue
from orksync.errors import LeadershipLost


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_key_added_twice_is_queued_once_and_keeps_its_first_trigger() -> None:
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a", "drift")
    clock.now += 1
    queue.add("a", "webhook")
    queue.add("b")
    assert len(queue) == 2
    item = queue.get(0)
    assert item is not None and (item.key, item.added, item.trigger) == ("a", 100.0, "drift")
    assert queue.get(0) is not None
    assert queue.get(0) is None


def test_a_key_is_handed_to_one_worker_at_a_time() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=Clock())
    queue.add("a")
    first = queue.get(0)
    assert first is not None
    queue.add("a")  # changed again while a worker has it
    queue.add("a")
    assert queue.get(0) is None  # not to a second worker
    queue.done("a")
    again = queue.get(0)
    assert again is not None and again.key == "a"
    queue.done("a")
    assert queue.get(0) is None  # the two adds made one more pass, not two


def test_retries_back_off_per_key_and_success_forgets_the_backoff() -> None:
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, base_delay=1.0, max_delay=5.0)
    delays = []
    for _ in range(5):
        queue.add("a")
        item = queue.get(0)
        assert item is not None
        delays.append(queue.retry("a"))
        queue.done("a")
        assert queue.get(0) is None  # not before its delay
        clock.now += delays[-1] - 0.01
        assert queue.get(0) is None
        clock.now += 0.01
        item = queue.get(0)
        assert item is not None and item.trigger == "retry"
        queue.done("a")
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]
    queue.forget("a")
    assert queue.failures("a") == 0
    assert queue.retry("a") == 1.0


def test_the_rate_limit_spaces_the_retries_of_many_keys() -> None:
    clock = Clock()
    queue: WorkQueue[int] = WorkQueue(clock=clock, base_delay=0.001, rate=10.0, burst=3)
    delays = [queue.retry(key) for key in range(6)]
    assert delays[:3] == [0.001] * 3  # the burst
    assert [round(d, 3) for d in delays[3:]] == [0.1, 0.2, 0.3]  # then 10 a second


def test_clear_drops_queued_and_delayed_keys() -> None:
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    queue.retry("b")
    assert len(queue) == 2
    queue.clear()
    clock.now += 100
    assert len(queue) == 0 and queue.get(0) is None


def test_a_slow_key_holds_no_other_key_and_failures_are_retried() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.01)
    slow_started, release = threading.Event(), threading.Event()
    fast_done = threading.Event()
    failed_once: list[str] = []
    done: list[tuple[str, str]] = []

    def process(key: str) -> None:
        if key == "slow":
            slow_started.set()
            assert release.wait(60)
        elif key == "flaky" and not failed_once:
            failed_once.append(key)
            raise RuntimeError("the API server refused it")
        elif key == "fast":
            fast_done.set()
        elif key == "lost":
            raise LeadershipLost("no lease")

    workers = Workers(queue, process, count=2,
                      on_done=lambda item, outcome: done.append((item.key, outcome)))
    try:
        queue.add("slow")
        assert slow_started.wait(30)
        queue.add("flaky")
        queue.add("fast")
        assert fast_done.wait(30)  # while "slow" is still under way
        assert not release.is_set()
        queue.add("lost")
        deadline = threading.Event()
        for _ in range(600):
            if ("flaky", "ok") in done and ("lost", "abandoned") in done:
                break
            deadline.wait(0.05)
        assert ("flaky", "retry") in done and ("flaky", "ok") in done
        assert done.count(("lost", "abandoned")) == 1  # a lost lease is not retried
    finally:
        release.set()
        workers.stop()


def test_workers_start_when_keys_come_and_end_once_the_queue_is_idle() -> None:
    """A root whose objects are left alone keeps no worker threads (an agent serving many
    Syncs would keep `--repair-workers` idle threads for each); a key added after the
    threads ended starts one again, and a retry waiting for its backoff keeps one."""
    queue: WorkQueue[str] = WorkQueue(base_delay=0.2)
    processed: list[str] = []
    failed = threading.Event()

    def process(key: str) -> None:
        if key == "flaky" and not failed.is_set():
            failed.set()
            raise RuntimeError("once")
        processed.append(key)

    def wait_for(predicate: Callable[[], bool]) -> None:
        pause = threading.Event()
        for _ in range(600):
            if predicate():
                return
            pause.wait(0.05)
        raise AssertionError("not reached in 30 s")

    workers = Workers(queue, process, count=3, idle=0.1)
    try:
        assert workers.running() == 0
        queue.add("a")
        assert 1 <= workers.running() <= 3
        wait_for(lambda: processed == ["a"] and workers.running() == 0)
        queue.add("flaky")  # fails once, comes back after its backoff, longer than `idle`
        wait_for(lambda: processed == ["a", "flaky"])
        assert failed.is_set()
        wait_for(lambda: workers.running() == 0)
        queue.add("b")
        wait_for(lambda: processed == ["a", "flaky", "b"])
    finally:
        workers.stop()

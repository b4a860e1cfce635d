"""The agent's work queue: keys (a custom resource, or the root of the plain objects) to
reconcile, handed to a few worker threads. Pure but for its threads and their lock.

The rules are client-go's workqueue's:

* A key is queued at most once: adding a queued key again changes nothing (dedupe).
* A key is processed by one worker at a time: a key added while a worker has it is
  queued again when that worker is done (`done`), not handed to a second worker.
* A failed key comes back after a delay (`retry`): the larger of its own backoff
  (`base_delay` doubled at every consecutive failure, at most `max_delay`) and the
  queue's rate limit on retries (a token bucket: `rate` a second, `burst` at once), so
  that many failing keys cannot flood the API server. `forget` resets a key's backoff
  after a success.
* `clear` drops every queued and delayed key (a replica that lost its lease: the next
  leader reconciles everything anyway); the keys under way finish or fail on their own.

`clock` is injectable so that the backoff is tested without waiting.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from orksync.errors import LeadershipLost

__all__ = ["Item", "WorkQueue", "Workers"]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Item(Generic[K]):
    key: K
    added: float  # when it was first added since it was last handed out (queue clock)
    trigger: str  # what first added it since then: drift, retry, ...


class _Bucket:
    """A token bucket: `rate` tokens a second, at most `burst`; `reserve` takes one and
    says how long to wait until it is really there."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = float(burst)
        self.last = clock()

    def reserve(self) -> float:
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
        self.last = now
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


class WorkQueue(Generic[K]):
    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 base_delay: float = 0.05, max_delay: float = 60.0, rate: float = 10.0,
                 burst: int = 100) -> None:
        self.clock = clock
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._bucket = _Bucket(rate, burst, clock)
        self._ready: deque[K] = deque()
        self._queued: dict[K, tuple[float, str]] = {}  # ready or waiting to be: added, trigger
        self._processing: set[K] = set()
        self._dirty: dict[K, tuple[float, str]] = {}  # added again while processed
        self._delayed: list[tuple[float, int, K, str]] = []  # (due, order, key, trigger)
        self._order = itertools.count()
        self._failures: dict[K, int] = {}
        self._cond = threading.Condition()
        self._shut = False
        # called after a key is added or scheduled, outside the queue's lock: the
        # workers start a thread for it (Workers)
        self.on_add: Callable[[], None] = lambda: None

    # --- adding ---------------------------------------------------------------------------

    def add(self, key: K, trigger: str = "drift") -> None:
        with self._cond:
            self._add(key, trigger, self.clock())
        self.on_add()

    def _add(self, key: K, trigger: str, now: float) -> None:
        if self._shut or key in self._queued or key in self._dirty:
            return
        if key in self._processing:
            self._dirty[key] = (now, trigger)
            return
        self._queued[key] = (now, trigger)
        self._ready.append(key)
        self._cond.notify()

    def add_after(self, key: K, delay: float, trigger: str = "retry") -> None:
        with self._cond:
            if delay <= 0:
                self._add(key, trigger, self.clock())
            else:
                heapq.heappush(self._delayed, (self.clock() + delay, next(self._order), key,
                                               trigger))
                self._cond.notify()
        self.on_add()

    def retry(self, key: K) -> float:
        """Add `key` again after its backoff (see the module doc); the delay."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
            delay = max(min(self.base_delay * 2 ** failures, self.max_delay),
                        self._bucket.reserve())
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    # --- taking ---------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> Item[K] | None:
        """The next ready key, now marked as processed (call `done` after it); None
        after `timeout` seconds (0: do not wait) or once shut down."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._shut:
                    return None
                now = self.clock()
                while self._delayed and self._delayed[0][0] <= now:
                    _, _, key, trigger = heapq.heappop(self._delayed)
                    self._add(key, trigger, now)
                if self._ready:
                    key = self._ready.popleft()
                    added, trigger = self._queued.pop(key)
                    self._processing.add(key)
                    return Item(key, added, trigger)
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    return None
                if self._delayed:
                    due = max(self._delayed[0][0] - now, 0.001)
                    wait = due if wait is None else min(wait, due)
                self._cond.wait(wait)

    def done(self, key: K) -> None:
        """A worker is done with `key`; added again meanwhile, it is queued now."""
        with self._cond:
            self._processing.discard(key)
            again = self._dirty.pop(key, None)
            if again is not None:
                self._add(key, again[1], again[0])

    # --- the whole queue ------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys queued or waiting for their retry (not those under way)."""
        with self._cond:
            return len(self._queued) + len(self._delayed) + len(self._dirty)

    def clear(self) -> None:
        with self._cond:
            self._ready.clear()
            self._queued.clear()
            self._dirty.clear()
            self._delayed.clear()
            self._failures.clear()

    def is_shut(self) -> bool:
        with self._cond:
            return self._shut

    def shutdown(self) -> None:
        with self._cond:
            self._shut = True
            self._cond.notify_all()


class Workers(Generic[K]):
    """Up to `count` threads taking keys from `queue` and passing them to `process`. A key
    whose processing raises is retried (`WorkQueue.retry`), except on LeadershipLost
    (the replica may no longer write: the queue is cleared by whoever saw the lease go);
    one that succeeds is forgotten. `on_done(item, outcome)` after each: `ok`, `retry`
    or `abandoned`.

    A thread starts when a key is added and fewer than `count` run, and ends once the
    queue has been empty (nothing ready, delayed or added again) for `idle` seconds: an
    agent serving many roots keeps no threads (nor their stacks) for the roots whose
    objects are left alone."""

    def __init__(self, queue: WorkQueue[K], process: Callable[[K], None], *, count: int,
                 on_done: Callable[[Item[K], str], None] | None = None,
                 idle: float = 60.0) -> None:
        self.queue = queue
        self.process = process
        self.on_done = on_done or (lambda item, outcome: None)
        self.count = count
        self.idle = idle
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        queue.on_add = self._spawn
        self._spawn()  # keys queued before the workers were made

    def running(self) -> int:
        """The threads alive now."""
        with self._lock:
            return len(self._threads)

    def _spawn(self) -> None:
        with self._lock:
            if len(self._threads) >= self.count or not len(self.queue) \
                    or self.queue.is_shut():
                return
            thread = threading.Thread(target=self._run, daemon=True,
                                      name=f"orksync-worker-{len(self._threads)}")
            self._threads.add(thread)
        thread.start()

    def _run(self) -> None:
        while True:
            item = self.queue.get(self.idle)
            if item is None:
                # ends unless a key came in meanwhile: checked under the lock `_spawn`
                # takes after each add, so a key is never left with no thread to take it
                with self._lock:
                    if self.queue.is_shut() or not len(self.queue):
                        self._threads.discard(threading.current_thread())
                        return
                continue
            outcome = "retry"
            try:
                self.process(item.key)
                outcome = "ok"
                self.queue.forget(item.key)
            except LeadershipLost as err:
                outcome = "abandoned"
                log.info("%s: abandoned: %s", item.key, err)
            except Exception as err:  # one key's failure stays its own: retried
                delay = self.queue.retry(item.key)
                log.error("%s: %s; again in %.1fs", item.key, err, delay)
            finally:
                self.queue.done(item.key)
            self.on_done(item, outcome)

    def stop(self) -> None:
        """Shut the queue down and wait for the keys under way."""
        self.queue.shutdown()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(30)

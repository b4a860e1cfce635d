"""Outages of the agent's components (its sync, the lease, the watches, ...), logged once
when one begins and once when it ends, with how long it lasted: a component that fails at
every try of a long outage (the lease every retry period, each watch at each reconnect,
the sync at each attempt) would otherwise write a line per try. The current outages are
also what /readyz names."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Outage:
    component: str
    since: float  # on the monotonic clock
    reason: str  # the first failure's message
    failures: int = 1


class Outages:
    """Per component: `failed` at every failure, `recovered` at every success; each logs
    only at a change (an outage begins, an outage ends). Thread-safe."""

    def __init__(self, log: logging.Logger,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._clock = clock
        self._lock = threading.Lock()
        self._current: dict[str, Outage] = {}

    def failed(self, component: str, reason: str) -> bool:
        """A failure of `component`; whether it began an outage (logged as an error)."""
        with self._lock:
            known = self._current.get(component)
            if known is not None:
                self._current[component] = Outage(component, known.since, known.reason,
                                                   known.failures + 1)
                return False
            self._current[component] = Outage(component, self._clock(), reason)
        self._log.error("%s: outage began: %s (said once; its end is logged)", component,
                        reason)
        return True

    def recovered(self, component: str) -> bool:
        """A success of `component`; whether it ended an outage (logged with its length
        and the number of failed tries)."""
        with self._lock:
            known = self._current.pop(component, None)
        if known is None:
            return False
        self._log.info("%s: outage over after %.1fs (%d failed tries)", component,
                       self._clock() - known.since, known.failures)
        return True

    def current(self) -> list[Outage]:
        """The outages going on, oldest first."""
        with self._lock:
            return sorted(self._current.values(), key=lambda o: o.since)

    def describe(self) -> str:
        """`component: reason (for Ns)` for each outage going on, `; `-separated."""
        now = self._clock()
        return "; ".join(f"{o.component} failing for {now - o.since:.0f}s: {o.reason}"
                         for o in self.current())
